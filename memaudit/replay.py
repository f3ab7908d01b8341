"""Replay: the bit-reproducibility check. Re-execute every recorded rollout, scoring pass and
attribution from the call cache alone (no model is contacted, no server started) into a scratch
store, then compare every artifact with the recorded one, row by row in key order.

A teacher-forced run replays its source run's transcripts: the source is re-executed first when it
is replayed too, and otherwise (an imported release, a run not asked for) its recorded episodes
are copied into the scratch store as an input.

This is the one scoring-side module that imports rollout: it re-runs the whole pipeline."""
from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from memaudit.config import Settings
from memaudit.errors import BadInput
from memaudit.provenance import teacher_forced_source
from memaudit.rollout.runner import run_rollout
from memaudit.runtime import Runtime, open_runtime
from memaudit.scoring.attribution import attribute_runs
from memaudit.scoring.recovery import DEFAULT_VARIANT, load_passes, score_runs
from memaudit.scoring.rescore import rescore_runs
from memaudit.scoring.tables import compute_tables
from memaudit.store import Store, dumps, loads, open_store

# What the scratch store starts from: the inputs and the caches, never an artifact.
COPIED = ("benchmarks", "users", "bank_entries", "tasks", "calls", "embeddings")
# What a teacher-forced run reads of a source run that is not re-executed.
TRANSCRIPTS = ("runs", "episodes", "turns")
# Artifact tables and their keys, compared in this order (the first difference is reported).
ARTIFACTS = {
    "episodes": ("run", "user_id", "task_idx"),
    "turns": ("run", "user_id", "task_idx", "turn"),
    "snapshots": ("run", "user_id", "task_idx"),
    "score_passes": ("run", "mode", "k", "variant"),
    "reconstructions": ("run", "mode", "k", "variant", "user_id", "dimension"),
    "attributions": ("run", "mode", "k", "variant", "user_id", "dimension"),
}
ORACLE_KEY = ("bench", "user_id", "dimension", "task_hash")
SHOWN = 120  # characters of a differing value shown in the report line


async def replay_runs(settings: Settings, runs=None) -> str | None:
    """None when every artifact of the runs is reproduced exactly, else the first difference as one
    line. Raises CacheMiss (naming the role) when the cache lacks a call the pipeline needs."""
    with tempfile.TemporaryDirectory(prefix="memaudit-replay-") as scratch_dir:
        scratch = Path(scratch_dir) / "replay.db"
        async with open_store(settings.db) as recorded:
            chosen = await _rollout_runs(recorded, runs)
            replayed = {r["run"] for r in chosen}
            sources = sorted({teacher_forced_source(r["config"]) for r in chosen} - replayed - {None})
            await _copy_inputs(recorded.path, scratch, sources)
            async with open_runtime(replace(settings, db=scratch, cache="replay")) as rt:
                await _reexecute(rt, recorded, chosen)
                await rt.store.flush()
                return await first_difference(recorded, rt.store, [r["run"] for r in chosen])


async def _rollout_runs(store: Store, wanted) -> list[dict]:
    runs = [r for r in await store.list_runs() if r["origin"] == "rollout"]
    if wanted is None:
        return runs
    by_id = {r["run"]: r for r in runs}
    missing = [w for w in wanted if w not in by_id]
    if missing:
        raise BadInput(f"no recorded rollout run {missing[0]!r} to replay", field="runs")
    return [by_id[w] for w in wanted]


async def _copy_inputs(recorded: Path, scratch: Path, sources: list[str]) -> None:
    """The inputs, plus the recorded transcripts of teacher-forced sources that are not replayed."""
    async with open_store(scratch) as store:
        await store.conn.execute("ATTACH DATABASE ? AS recorded", (str(recorded),))
        await store.write([(f"INSERT INTO {table} SELECT * FROM recorded.{table}", ()) for table in COPIED]
                          + [(f"INSERT INTO {table} SELECT * FROM recorded.{table} WHERE run=?", (run,))
                             for run in sources for table in TRANSCRIPTS])
        await store.conn.execute("DETACH DATABASE recorded")


async def _reexecute(rt: Runtime, recorded: Store, runs: list[dict]) -> None:
    """Runs that were (or could have been) executed together are re-executed together, so a large
    replay keeps the recorded concurrency; the cache makes the grouping irrelevant to the result.
    Live runs go first: a teacher-forced run reads the transcripts its source re-executed."""
    rollouts: dict[str, list[dict]] = {}
    for run in sorted(runs, key=lambda r: teacher_forced_source(r["config"]) is not None):
        rollouts.setdefault(dumps([run["bench"], run["config"]]), []).append(run)
    for group in rollouts.values():
        cfg = group[0]["config"]
        bench = await rt.store.load_benchmark(group[0]["bench"])
        await run_rollout(rt, bench, [r["system"] for r in group], users=cfg["users"], tasks=cfg["tasks"],
                          max_turns=cfg["max_turns"], tag=cfg["tag"], k=cfg["k"], progress=False,
                          transcripts=teacher_forced_source(cfg))

    passes = {r["run"]: await load_passes(recorded, r["run"]) for r in runs}
    scoring: dict[str, list[str]] = {}  # default passes first: rescoring variants start from their predictions
    for run, found in passes.items():
        default = [p for p in found if p["variant"] == DEFAULT_VARIANT]
        for (window, dims), group in _by_settings(default).items():
            modes = sorted({p["mode"] for p in group})
            ks = sorted({p["k"] for p in group if p["mode"] == "retrieve"}) or [5]
            scoring.setdefault(dumps([modes, ks, window, dims]), []).append(run)
    for signature, group in scoring.items():
        modes, ks, window, dims = loads(signature)
        await score_runs(rt, group, modes, ks=tuple(ks), context_window=window, dims=dims)
    for run, found in passes.items():
        variants = {p["variant"]: p["config"]["rescore"] for p in found if p["variant"] != DEFAULT_VARIANT}
        for variant, change in sorted(variants.items()):
            await rescore_runs(rt, [run], variant, judge_model=change["judge_model"],
                               judge_prompt=change["judge_prompt"], reader_model=change["reader_model"])

    attribution: dict[str, list[str]] = {}
    for run in runs:
        modes = [r["mode"] for r in await recorded.fetchall(
            "SELECT DISTINCT mode FROM attributions WHERE run=? ORDER BY mode", (run["run"],))]
        if modes:
            attribution.setdefault(dumps(modes), []).append(run["run"])
    for modes, group in attribution.items():
        await attribute_runs(rt, group, loads(modes))


def _by_settings(passes: list[dict]) -> dict[tuple, list[dict]]:
    """Passes grouped by the options they were scored with (a run may mix windows or dims)."""
    out: dict[tuple, list[dict]] = {}
    for p in passes:
        out.setdefault((p["config"]["context_window"], p["config"]["dims"]), []).append(p)
    return out


async def first_difference(recorded: Store, replayed: Store, runs: list[str]) -> str | None:
    marks = ",".join("?" * len(runs))
    for table, key in ARTIFACTS.items():
        sql = f"SELECT * FROM {table} WHERE run IN ({marks}) ORDER BY {', '.join(key)}"
        found = _compare(table, key, await recorded.fetchall(sql, runs), await replayed.fetchall(sql, runs))
        if found:
            return found
    # Oracle verdicts are shared with runs that were not replayed: compare the ones replay made.
    replayed_oracle = await replayed.fetchall(f"SELECT * FROM oracle ORDER BY {', '.join(ORACLE_KEY)}")
    recorded_oracle = [row for row in [await recorded.fetchone(
        f"SELECT * FROM oracle WHERE {' AND '.join(f'{c}=?' for c in ORACLE_KEY)}", [r[c] for c in ORACLE_KEY])
        for r in replayed_oracle] if row is not None]
    found = _compare("oracle", ORACLE_KEY, recorded_oracle, replayed_oracle)
    if found:
        return found
    # Intervals are a function of the compared rows: skip the resampling.
    return _compare_json("tables", await compute_tables(recorded, runs, bootstrap=0),
                         await compute_tables(replayed, runs, bootstrap=0))


def _compare(table: str, key: tuple, recorded: list, replayed: list) -> str | None:
    before = {tuple(r[c] for c in key): dict(r) for r in recorded}
    after = {tuple(r[c] for c in key): dict(r) for r in replayed}
    for k in sorted(before.keys() | after.keys()):
        where = f"{table} {dict(zip(key, k))}"
        if k not in after:
            return f"{where}: recorded but not replayed"
        if k not in before:
            return f"{where}: replayed but not recorded"
        for column, value in before[k].items():
            if after[k][column] != value:
                return (f"{where} column {column}: recorded {_short(value)} vs replayed "
                        f"{_short(after[k][column])}")
    return None


def _compare_json(path: str, recorded, replayed) -> str | None:
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for name in sorted(recorded.keys() | replayed.keys()):
            found = _compare_json(f"{path}.{name}", recorded.get(name), replayed.get(name))
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(replayed, list) and len(recorded) == len(replayed):
        for i, (a, b) in enumerate(zip(recorded, replayed)):
            found = _compare_json(f"{path}[{i}]", a, b)
            if found:
                return found
        return None
    if recorded != replayed:
        return f"{path}: recorded {_short(recorded)} vs replayed {_short(replayed)}"
    return None


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN] + "…"
