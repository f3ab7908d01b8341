"""Episodes, their turns, and the memory snapshot a system left after each episode."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memaudit.canonical import dumps_native
from memaudit.store.rows import Row, Statement, dumps, loads, marks
from memaudit.types import EMBED_TRUNCATED, Episode, MemoryOp, Turn, footprint

if TYPE_CHECKING:
    from memaudit.store import Store



def judge_failed(per_pref) -> bool:
    """A turn the preference judge failed to rate: its per-preference records carry the error
    (memaudit/rollout/pref_judge.py). Its score is None and D leaves it out, so it is counted.
    Stored with the turn (db/015 filled it for turns written before, with the same test in SQL)."""
    return isinstance(per_pref, list) and any(isinstance(p, dict) and "error" in p for p in per_pref)


def write_failures(state):
    """The memory writes an adapter lost for good, as its snapshot state counts them under
    `write_failures` (adapters/memory_calls.py FailureLog); None for a state without the count.
    Stored with the snapshot (db/015 filled it for snapshots written before)."""
    return state.get("write_failures") if isinstance(state, dict) else None


def embed_truncated(state):
    """The texts an adapter's embedding model cut at its window, as its snapshot state counts them
    (adapters/base.py WindowCount); None for a state without the count. Stored with the snapshot
    (db/020)."""
    return state.get(EMBED_TRUNCATED) if isinstance(state, dict) else None


def uncalled_tool_requests(state) -> int:
    """The tool requests of a memory library that never got a call, as its snapshot state counts them
    (adapters/memory_calls.py FailureLog: `tool_requests`, while `tool_calls` is 0); 0 otherwise."""
    if not isinstance(state, dict) or state.get("tool_calls"):
        return 0
    requests = state.get("tool_requests", 0)
    return requests if isinstance(requests, int) else 0


@dataclass(frozen=True)
class EpisodeRow(Row):
    TABLE = "episodes"
    run: str
    user_id: str
    task_idx: int
    task: str
    end_reason: str
    n_turns: int
    final_preference_score: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class TurnRow(Row):
    TABLE = "turns"
    ENCODE = {"per_pref": dumps, "fallback": int, "judge_failed": int}
    run: str
    user_id: str
    task_idx: int
    turn: int
    assistant: str
    feedback_type: str | None
    user_text: str | None
    preference_score: float | None
    per_pref: list = field(default_factory=list)
    fallback: bool = False
    judge_failed: bool = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "judge_failed", judge_failed(self.per_pref))


@dataclass(frozen=True)
class TurnChangeRow(Row):
    """The bank change disclosed on a turn (evolving banks only): the entry and its version."""
    TABLE = "turn_changes"
    run: str
    user_id: str
    task_idx: int
    turn: int
    dimension: str
    version: int


@dataclass(frozen=True)
class SnapshotRow(Row):
    """The memory a system left after an episode. Keys in their native order, not sorted: dump_all
    shows the reader the store's items as the system wrote them (the published order), and a
    restored system keeps that order too."""
    TABLE = "snapshots"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"state": dumps_native, "items": dumps_native}
    run: str
    user_id: str
    task_idx: int
    state: Any
    items: list
    n_items: int
    avg_chars: float
    write_failures: Any = field(init=False)
    embed_truncated: Any = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "write_failures", write_failures(self.state))
        object.__setattr__(self, "embed_truncated", embed_truncated(self.state))


@dataclass(frozen=True)
class MemoryOpRow(Row):
    """One timed memory operation of a rollout (db/016): a machine measurement, not an artifact."""
    TABLE = "memory_ops"
    VERB = "INSERT OR REPLACE"  # an episode run again after a kill times its operations again
    run: str
    user_id: str
    task_idx: int
    seq: int
    op: str
    seconds: float
    calls: int
    cached: int
    startup: bool
    alone: bool


class Episodes:
    def __init__(self, db: "Store"):
        self.db = db

    # -- writing ---------------------------------------------------------------------------
    @staticmethod
    def statements(ep: Episode, final_preference: float | None) -> list[Statement]:
        st: list[Statement] = [EpisodeRow(ep.run, ep.user_id, ep.task_index, ep.task, ep.end_reason, len(ep.turns),
                                          final_preference, ep.error).statement()]
        for t in ep.turns:
            st.append(TurnRow(ep.run, ep.user_id, ep.task_index, t.index, t.assistant, t.feedback_type, t.user_text,
                              t.preference_score, t.per_pref, t.fallback).statement())
            if t.change is not None:  # evolving banks only: the bank change disclosed on this turn
                st.append(TurnChangeRow(ep.run, ep.user_id, ep.task_index, t.index, t.change["dimension"],
                                        t.change["version"]).statement())
        return st

    @staticmethod
    def op_statements(ep: Episode, ops: list[MemoryOp]) -> list[Statement]:
        """The timed memory operations of an episode, in order."""
        return [MemoryOpRow(ep.run, ep.user_id, ep.task_index, seq, op.op, op.seconds, op.calls, op.cached,
                            op.startup, op.alone).statement()
                for seq, op in enumerate(ops)]

    @staticmethod
    def snapshot_statement(run: str, user_id: str, task_idx: int, state: Any, items: list[dict]) -> Statement:
        return SnapshotRow(run, user_id, task_idx, state, items, *footprint(items)).statement()

    # -- reading ---------------------------------------------------------------------------
    async def done(self, run: str, user_id: str) -> set[int]:
        rows = await self.db.fetchall("SELECT task_idx FROM episodes WHERE run=? AND user_id=?", (run, user_id))
        return {r["task_idx"] for r in rows}

    async def load(self, run: str, user_id: str | None = None) -> list[Episode]:
        where, params = ("run=?", (run,)) if user_id is None else ("run=? AND user_id=?", (run, user_id))
        turns: dict[tuple, list[Turn]] = {}
        changes = {(r["user_id"], r["task_idx"], r["turn"]): {"dimension": r["dimension"], "version": r["version"]}
                   for r in await self.db.fetchall(f"SELECT * FROM turn_changes WHERE {where}", params)}
        for r in await self.db.fetchall(f"SELECT * FROM turns WHERE {where} ORDER BY user_id, task_idx, turn", params):
            turns.setdefault((r["user_id"], r["task_idx"]), []).append(
                Turn(r["turn"], r["assistant"], r["feedback_type"], r["user_text"], r["preference_score"],
                     loads(r["per_pref"]), bool(r["fallback"]), changes.get((r["user_id"], r["task_idx"], r["turn"]))))
        return [Episode(r["run"], r["user_id"], r["task_idx"], r["task"], turns.get((r["user_id"], r["task_idx"]), []),
                        r["end_reason"], r["error"])
                for r in await self.db.fetchall(f"SELECT * FROM episodes WHERE {where} ORDER BY user_id, task_idx",
                                                params)]

    async def feedback(self, run: str, user_id: str) -> dict[int, list[dict]]:
        """task index -> (turn, feedback_type, fallback, per_pref) of each turn of one user's episodes,
        without the texts (an episode without turns maps to []): what the carry-over figures read."""
        episodes: dict[int, list[dict]] = {}
        for r in await self.db.fetchall(
                "SELECT e.task_idx, t.turn, t.feedback_type, t.fallback, t.per_pref FROM episodes e "
                "LEFT JOIN turns t ON t.run=e.run AND t.user_id=e.user_id AND t.task_idx=e.task_idx "
                "WHERE e.run=? AND e.user_id=? ORDER BY e.task_idx, t.turn", (run, user_id)):
            turns = episodes.setdefault(r["task_idx"], [])
            if r["turn"] is not None:
                turns.append({"feedback_type": r["feedback_type"], "fallback": bool(r["fallback"]),
                              "per_pref": loads(r["per_pref"])})
        return episodes

    async def disclosed_changes(self, run: str, user_id: str) -> set[tuple[str, int]]:
        """(dimension, version) of every bank change a turn of the user's episodes disclosed."""
        return {(r["dimension"], r["version"]) for r in await self.db.fetchall(
            "SELECT dimension, version FROM turn_changes WHERE run=? AND user_id=?", (run, user_id))}

    async def change_rows(self, run: str) -> list[dict]:
        """Every disclosed change of the run: user, task (episode), turn, dimension, version."""
        return [dict(r) for r in await self.db.fetchall(
            "SELECT user_id, task_idx, turn, dimension, version FROM turn_changes WHERE run=? "
            "ORDER BY user_id, task_idx, turn", (run,))]

    async def final_preferences(self, run: str, user_id: str) -> dict[tuple[str, int], float | None]:
        """(user, task index) -> the episode's final preference score as stored, for one user."""
        return {(r["user_id"], r["task_idx"]): r["final_preference_score"] for r in await self.db.fetchall(
            "SELECT user_id, task_idx, final_preference_score FROM episodes WHERE run=? AND user_id=?",
            (run, user_id))}

    async def outcomes(self, run: str) -> dict:
        """Counts of the run's episodes: all, satisfied, failed, turns that were simulator fallbacks,
        and turns the preference judge failed to rate."""
        row = await self.db.fetchone(
            "SELECT COUNT(*) AS episodes, COALESCE(SUM(end_reason='satisfied'), 0) AS satisfied, "
            "COALESCE(SUM(end_reason='failed'), 0) AS failed, "
            "(SELECT COUNT(*) FROM turns t WHERE t.run=e.run AND t.fallback=1) AS fallbacks, "
            "(SELECT COUNT(*) FROM turns t WHERE t.run=e.run AND t.judge_failed=1) AS judge_failures "
            "FROM episodes e WHERE run=?", (run,))
        return dict(row)

    async def count(self) -> int:
        """Episodes in the store, over every run."""
        return (await self.db.fetchone("SELECT COUNT(*) AS n FROM episodes"))["n"]

    def episode_rows(self, run: str):
        """(user_id, end_reason, n_turns) of every episode, by user and task, as an async iterator."""
        return self.db.iterate(
            "SELECT user_id, end_reason, n_turns FROM episodes WHERE run=? ORDER BY user_id, task_idx", (run,))

    def turn_rows(self, run: str):
        """(user_id, preference_score, fallback, judge_failed) of every turn, by user, task and turn,
        as an async iterator (a run's turns are not held at once)."""
        return self.db.iterate(
            "SELECT user_id, preference_score, fallback, judge_failed FROM turns t WHERE run=? "
            "ORDER BY user_id, task_idx, turn", (run,))

    async def users_with_records(self, run: str) -> set[str]:
        """Users with an episode or a memory snapshot in the run."""
        return {r["user_id"] for r in await self.db.fetchall(
            "SELECT user_id FROM episodes WHERE run=? UNION SELECT user_id FROM snapshots WHERE run=?", (run, run))}

    async def user_transcripts(self, runs: list[str], user_id: str) -> dict:
        """(run, task index) -> the episode row with its turn rows, for one user across runs."""
        episodes: dict = {}
        for r in await self.db.fetchall(f"SELECT * FROM episodes WHERE user_id=? AND run IN ({marks(runs)})",
                                        [user_id, *runs]):
            episodes[(r["run"], r["task_idx"])] = {**dict(r), "turns": []}
        for r in await self.db.fetchall(f"SELECT * FROM turns WHERE user_id=? AND run IN ({marks(runs)}) "
                                        "ORDER BY run, task_idx, turn", [user_id, *runs]):
            episodes[(r["run"], r["task_idx"])]["turns"].append(dict(r))
        return episodes

    async def live_op_seconds(self, run: str) -> dict[str, list[float]]:
        """In seconds, over what no call cache answered: `writes` the write time of each episode
        (counted when none of its model calls was a cache hit and none of its writes paid the
        system's start-up), `reads` each read but those that paid the start-up, `startup` each
        operation that did (the first after the system was opened)."""
        writes = await self.db.fetchall(
            "SELECT SUM(seconds) AS seconds FROM memory_ops WHERE run=? AND op != 'search' "
            "GROUP BY user_id, task_idx HAVING SUM(cached) = 0 AND SUM(startup) = 0 ORDER BY user_id, task_idx",
            (run,))
        reads = await self.db.fetchall(
            "SELECT seconds, startup FROM memory_ops WHERE run=? AND op = 'search' AND cached = 0 "
            "ORDER BY user_id, task_idx, seq", (run,))
        startup = await self.db.fetchall(
            "SELECT seconds FROM memory_ops WHERE run=? AND startup = 1 AND cached = 0 ORDER BY user_id, task_idx",
            (run,))
        return {"writes": [r["seconds"] for r in writes], "reads": [r["seconds"] for r in reads if not r["startup"]],
                "startup": [r["seconds"] for r in startup]}

    async def op_counts(self, run: str) -> dict:
        """Over a run's timed memory operations: the user messages the memory was given (the task
        counts as the first), the model calls the operations made and how many the call cache
        answered, and how many operations ran with no other (system, user) running (`alone`) out
        of `ops`. All None for a run without timed operations (imported)."""
        row = await self.db.fetchone(
            "SELECT COUNT(*) AS ops, SUM(op IN ('task_start', 'user')) AS messages, SUM(calls) AS calls, "
            "SUM(cached) AS cached, SUM(alone) AS alone FROM memory_ops WHERE run=?", (run,))
        return dict(row) if row["ops"] else {key: None for key in row.keys()}

    # -- snapshots -------------------------------------------------------------------------
    async def last_snapshot(self, run: str, user_id: str) -> dict | None:
        row = await self.db.fetchone(
            "SELECT * FROM snapshots WHERE run=? AND user_id=? ORDER BY task_idx DESC LIMIT 1", (run, user_id))
        if row is None:
            return None
        return {"task_idx": row["task_idx"], "state": loads(row["state"]), "items": loads(row["items"]),
                "n_items": row["n_items"], "avg_chars": row["avg_chars"]}

    async def final_snapshot_tasks(self, run: str) -> dict[str, int]:
        """user -> the task index of the user's last memory snapshot in the run."""
        rows = await self.db.fetchall(
            "SELECT user_id, MAX(task_idx) AS last FROM snapshots WHERE run=? GROUP BY user_id", (run,))
        return {r["user_id"]: r["last"] for r in rows}

    async def snapshot_users(self, run: str) -> list[str]:
        return [r["user_id"] for r in await self.db.fetchall(
            "SELECT DISTINCT user_id FROM snapshots WHERE run=? ORDER BY user_id", (run,))]

    async def last_footprints(self, run: str) -> dict[str, tuple[int, float]]:
        """user -> (items, mean chars) of the user's last snapshot in the run."""
        return {user: (items, chars) for user, (items, chars, _, _) in (await self.last_figures(run)).items()}

    async def last_write_failures(self, run: str) -> dict:
        """user -> the memory writes lost for good as of the user's last snapshot (write_failures)."""
        return {user: lost for user, (_, _, lost, _) in (await self.last_figures(run)).items()}

    async def last_embed_truncated(self, run: str) -> dict:
        """user -> the texts its embedding model cut as of the user's last snapshot (None: not counted)."""
        return {user: cut for user, (_, _, _, cut) in (await self.last_figures(run)).items()}

    async def last_uncalled_tools(self, run: str) -> dict[str, int]:
        """user -> the library's tool requests that never got a call, as of the user's last snapshot."""
        rows = await self.db.fetchall("SELECT user_id, MAX(task_idx) AS last, state FROM snapshots WHERE run=? "
                                      "GROUP BY user_id", (run,))
        return {r["user_id"]: uncalled_tool_requests(loads(r["state"])) for r in rows}

    async def last_figures(self, run: str) -> dict[str, tuple[int, float, Any, Any]]:
        """user -> (items, mean chars, write_failures, embed_truncated) of the user's last snapshot."""
        # SQLite takes the bare columns of a MAX() aggregate from the row holding the maximum; the
        # query reads only the covering index of db/020, never the snapshot rows.
        rows = await self.db.fetchall(
            "SELECT user_id, MAX(task_idx) AS last, n_items, avg_chars, write_failures, embed_truncated FROM snapshots "
            "WHERE run=? GROUP BY user_id", (run,))
        return {r["user_id"]: (r["n_items"], r["avg_chars"], r["write_failures"], r["embed_truncated"]) for r in rows}
