"""Scoring passes (what each pass ran with) and the reconstructions they produced."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memaudit.store.rows import Row, Statement, dumps, loads, marks
from memaudit.types import DEFAULT_VARIANT, Reconstruction

if TYPE_CHECKING:
    from memaudit.store import Store


@dataclass(frozen=True)
class Rescore:
    """What a frozen-rescoring variant changed against the variant it started from."""
    judge_model: str | None
    judge_prompt: str | None   # an absolute path, so replay finds it from any directory
    reader_model: str | None
    base_variant: str = DEFAULT_VARIANT  # stored as "from"
    panel: dict | None = None  # a judge panel: {"judges": [...], "repeats": n} (memaudit/scoring/panel.py)

    def to_json(self) -> dict:
        panel = {} if self.panel is None else {"panel": self.panel}
        return {"from": self.base_variant, "judge_model": self.judge_model, "judge_prompt": self.judge_prompt,
                "reader_model": self.reader_model, **panel}

    @classmethod
    def from_json(cls, data: dict | None) -> "Rescore | None":
        if data is None:
            return None
        return cls(data.get("judge_model"), data.get("judge_prompt"), data.get("reader_model"),
                   data.get("from", DEFAULT_VARIANT), data.get("panel"))


@dataclass(frozen=True)
class PassConfig:
    """What a scoring pass ran with (`score_passes.config`): the reader window asked for and the
    one used, which targets (`dims`), the frozen-rescoring change (None for the default variant),
    and the reader's and judge's models and prompt hashes."""
    context_window: int | None
    window: int | None
    dims: str
    rescore: Rescore | None = None
    scorer: dict = field(default_factory=dict)  # reader_model, reader_prompt, judge_model, judge_prompt

    def to_json(self) -> dict:
        return {"context_window": self.context_window, "window": self.window, "dims": self.dims,
                "rescore": None if self.rescore is None else self.rescore.to_json(), **self.scorer}

    @classmethod
    def from_json(cls, data: dict | None) -> "PassConfig":
        data = dict(data or {})
        return cls(data.pop("context_window", None), data.pop("window", None), data.pop("dims", "all"),
                   Rescore.from_json(data.pop("rescore", None)), data)


@dataclass(frozen=True)
class ScorePass(Row):
    """A scoring pass and what it ran with."""
    TABLE = "score_passes"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"config": lambda config: dumps(config.to_json())}
    run: str
    mode: str
    k: int
    variant: str
    config: PassConfig


@dataclass
class ReconstructionRow(Reconstruction, Row):
    TABLE = "reconstructions"
    VERB = "INSERT OR REPLACE"
    ENCODE = {"evidence": dumps}
    NOT_STORED = ("verdicts",)  # a panel's verdicts have their own table (store/judges.py)


class Scores:
    def __init__(self, db: "Store"):
        self.db = db

    # -- passes ----------------------------------------------------------------------------
    async def record_pass(self, run: str, mode: str, k: int, variant: str, config: PassConfig) -> None:
        await self.db.write([ScorePass(run, mode, k, variant, config).statement()])

    async def passes(self, run: str, variant: str | None = None) -> list[ScorePass]:
        sql, params = "SELECT * FROM score_passes WHERE run=?", [run]
        if variant is not None:
            sql += " AND variant=?"
            params.append(variant)
        rows = await self.db.fetchall(sql + " ORDER BY mode, k, variant", params)
        return [ScorePass(r["run"], r["mode"], r["k"], r["variant"], PassConfig.from_json(loads(r["config"])))
                for r in rows]

    async def scored_runs(self, variant: str = DEFAULT_VARIANT) -> list[str]:
        """Runs with at least one pass of `variant`, sorted."""
        return [r["run"] for r in await self.db.fetchall(
            "SELECT DISTINCT run FROM score_passes WHERE variant=? ORDER BY run", (variant,))]

    # -- reconstructions -------------------------------------------------------------------
    @staticmethod
    def reconstruction_statement(r: Reconstruction, *, replace: bool = True) -> Statement:
        """`replace=False` makes a second row for the same key an IntegrityError (an import's damage)."""
        return ReconstructionRow.of(r).statement(None if replace else "INSERT")

    async def load(self, run: str, mode: str | None = None, *, k: int | None = None,
                   variant: str = DEFAULT_VARIANT, user_id: str | None = None) -> list[Reconstruction]:
        sql, params = "SELECT * FROM reconstructions WHERE run=? AND variant=?", [run, variant]
        for col, val in (("mode", mode), ("k", k), ("user_id", user_id)):
            if val is not None:
                sql += f" AND {col}=?"
                params.append(val)
        rows = await self.db.fetchall(sql + " ORDER BY mode, k, user_id, category, dimension", params)
        return [_reconstruction(r) for r in rows]

    async def keys(self, run: str, variant: str) -> set[tuple]:
        """(mode, k, user, dimension) of every stored row: the targets a resumed pass skips."""
        rows = await self.db.fetchall(
            "SELECT mode, k, user_id, dimension FROM reconstructions WHERE run=? AND variant=?", (run, variant))
        return {(r["mode"], r["k"], r["user_id"], r["dimension"]) for r in rows}

    async def truths(self, run: str, variant: str) -> dict[tuple, str]:
        """(mode, k, user, dimension) -> the ground truth each stored row was judged against."""
        rows = await self.db.fetchall("SELECT mode, k, user_id, dimension, ground_truth FROM reconstructions "
                                      "WHERE run=? AND variant=?", (run, variant))
        return {(r["mode"], r["k"], r["user_id"], r["dimension"]): r["ground_truth"] for r in rows}

    @staticmethod
    def drop_statements(run: str, variant: str, keys) -> list[Statement]:
        """Delete the rows of these (mode, k, user, dimension) keys and the attributions and panel
        verdicts made from them."""
        where = "run=? AND variant=? AND mode=? AND k=? AND user_id=? AND dimension=?"
        return [(f"DELETE FROM {table} WHERE {where}", (run, variant, *key))
                for key in keys for table in ("attributions", "judge_verdicts", "reconstructions")]

    async def stale(self, run: str):
        """Per (variant, user, snapshot read): reconstructions of the run whose memory snapshot is not
        the user's final one (read while the rollout was still writing, or before it was resumed)."""
        return await self.db.fetchall(
            "SELECT r.variant, r.user_id, r.snapshot_task, s.last, COUNT(*) AS n FROM reconstructions r "
            "LEFT JOIN (SELECT user_id, MAX(task_idx) AS last FROM snapshots WHERE run=? GROUP BY user_id) s "
            "ON s.user_id = r.user_id WHERE r.run=? AND r.snapshot_task IS NOT s.last "
            "GROUP BY r.variant, r.user_id, r.snapshot_task ORDER BY r.variant, r.user_id", (run, run))

    @staticmethod
    def drop_stale_statements(run: str) -> list[Statement]:
        """Delete the stale reconstructions of a run and the attributions made from them."""
        stale = ("SELECT 1 FROM reconstructions r WHERE r.run=? AND r.snapshot_task IS NOT "
                 "(SELECT MAX(s.task_idx) FROM snapshots s WHERE s.run=r.run AND s.user_id=r.user_id)")
        return [(f"DELETE FROM attributions WHERE run=? AND EXISTS ({stale} AND r.mode=attributions.mode AND "
                 "r.k=attributions.k AND r.variant=attributions.variant AND r.user_id=attributions.user_id AND "
                 "r.dimension=attributions.dimension)", (run, run)),
                (f"DELETE FROM judge_verdicts WHERE run=? AND EXISTS ({stale} AND r.mode=judge_verdicts.mode AND "
                 "r.k=judge_verdicts.k AND r.variant=judge_verdicts.variant AND r.user_id=judge_verdicts.user_id AND "
                 "r.dimension=judge_verdicts.dimension)", (run, run)),
                (f"DELETE FROM reconstructions WHERE run=? AND snapshot_task IS NOT "
                 "(SELECT MAX(s.task_idx) FROM snapshots s WHERE s.run=reconstructions.run AND "
                 "s.user_id=reconstructions.user_id)", (run,))]

    async def summary(self, run: str, variant: str) -> list[dict]:
        """Per (mode, k): targets, ok, overflow, failed and the flat mean score of non-failed rows."""
        rows = await self.db.fetchall(
            "SELECT mode, k, COUNT(*) AS n, SUM(status='ok') AS ok, SUM(status='overflow') AS overflow, "
            "SUM(status='failed') AS failed, AVG(CASE WHEN status!='failed' THEN score END) AS mean "
            "FROM reconstructions WHERE run=? AND variant=? GROUP BY mode, k ORDER BY mode, k", (run, variant))
        return [dict(r) for r in rows]

    async def empty_reads(self, run: str, variant: str) -> list[dict]:
        """Per (mode, k): the reads of the run's targets (`reads`), those whose evidence shows they
        returned nothing (`empty`: a store of no items, or a search of no results) and those that
        recorded no evidence (`unrecorded`: an imported run's)."""
        rows = await self.db.fetchall(
            "SELECT mode, k, COUNT(*) AS reads, "
            "SUM(COALESCE(json_extract(evidence, '$.n_items') = 0, json_array_length(evidence, '$.items') = 0, 0)) "
            "AS empty, SUM(json_extract(evidence, '$.n_items') IS NULL AND json_extract(evidence, '$.items') IS NULL) "
            "AS unrecorded FROM reconstructions WHERE run=? AND variant=? GROUP BY mode, k ORDER BY mode, k",
            (run, variant))
        return [dict(r) for r in rows]

    def score_rows(self, run: str, variant: str):
        """(mode, k, user_id, category, score, status) of every row, in key order (B's input), as an
        async iterator."""
        return self.db.iterate(
            "SELECT mode, k, user_id, category, score, status FROM reconstructions WHERE run=? AND variant=? "
            "ORDER BY mode, k, user_id, category, dimension", (run, variant))

    async def paired_rows(self, runs: list[str], baseline: str, variant: str):
        """Targets scored under both variants: key columns, s0/st0 (baseline) and s1/st1 (variant)."""
        return await self.db.fetchall(
            "SELECT b.run, b.mode, b.k, b.user_id, b.category, b.dimension, b.score AS s0, b.status AS st0, "
            "v.score AS s1, v.status AS st1 FROM reconstructions b JOIN reconstructions v "
            "ON v.run=b.run AND v.mode=b.mode AND v.k=b.k AND v.user_id=b.user_id AND v.dimension=b.dimension "
            f"WHERE b.variant=? AND v.variant=? AND b.run IN ({marks(runs)}) "
            "ORDER BY b.run, b.mode, b.k, b.user_id, b.category, b.dimension", (baseline, variant, *runs))

    async def scored_modes(self, runs: list[str], variant: str) -> list[tuple[str, str, int]]:
        """(run, mode, k) of every pass with rows, sorted."""
        return [(r["run"], r["mode"], r["k"]) for r in await self.db.fetchall(
            f"SELECT DISTINCT run, mode, k FROM reconstructions WHERE variant=? AND run IN ({marks(runs)}) "
            "ORDER BY run, mode, k", [variant, *runs])]

    def pass_rows(self, run: str, mode: str, k: int, variant: str):
        """User, dimension, category, score, status and label of every row of one pass (no evidence),
        as an async iterator (the caller keeps what it needs, not every row object at once)."""
        return self.db.iterate(
            "SELECT user_id, category, dimension, score, status, label FROM reconstructions "
            "WHERE run=? AND mode=? AND k=? AND variant=?", (run, mode, k, variant))

    async def scored_users(self, run: str, variant: str) -> list[str]:
        """Users with at least one row of `variant` in the run, sorted."""
        return [r["user_id"] for r in await self.db.fetchall(
            "SELECT DISTINCT user_id FROM reconstructions WHERE run=? AND variant=? ORDER BY user_id", (run, variant))]

    async def user_rows(self, runs: list[str], user_id: str, variant: str) -> list[dict]:
        """Every row of one user across the runs, evidence decoded, by run, mode and k."""
        return [{**dict(r), "evidence": loads(r["evidence"])} for r in await self.db.fetchall(
            f"SELECT * FROM reconstructions WHERE variant=? AND user_id=? AND run IN ({marks(runs)}) "
            "ORDER BY run, mode, k", [variant, user_id, *runs])]


def _reconstruction(r) -> Reconstruction:
    return Reconstruction(r["run"], r["mode"], r["k"], r["variant"], r["user_id"], r["category"], r["dimension"],
                          r["explanation"], r["ground_truth"], loads(r["evidence"]), r["label"], r["reason"],
                          r["score"], r["judge_reason"], r["status"], r["error"], r["snapshot_task"])
