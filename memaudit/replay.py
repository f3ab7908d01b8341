"""Replay: the bit-reproducibility check. Re-execute every recorded rollout, scoring pass and
attribution from the call cache alone (no model is contacted, no server started) into a scratch
store, then compare every artifact with the recorded one, row by row in key order.

A teacher-forced run replays its source run's transcripts: the source is re-executed first when it
is replayed too, and otherwise (an imported release, a run not asked for) its recorded episodes
are copied into the scratch store as an input.

This is the one scoring-side module that imports rollout: it re-runs the whole pipeline."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from memaudit.canonical import differences
from memaudit.config import PROMPTS_DIR, Settings
from memaudit.errors import BadInput, CacheMiss
from memaudit.tables.judge_checks import Thresholds
from memaudit.scoring.judge_check import run_judge_check
from memaudit.scoring.panel import Panel, recorded_fields
from memaudit.provenance import NOT_REPLAYED, merge_roles, recorded_embeddings, recorded_settings
from memaudit.rollout.runner import rollout_runs
from memaudit.runtime import Runtime, open_runtime
from memaudit.scratch import owned_prefix, remove_stale
from memaudit.stages import ATTRIBUTE, JUDGE_CHECK, RESCORE, ROLLOUT, SCORE, STAGES, UTILIZATION
from memaudit.scoring.attribution import FAILED_STEPS, attribute_runs
from memaudit.scoring.evolving import score_evolving
from memaudit.scoring.recovery import EVERY_TARGET, score_runs, with_prompts
from memaudit.scoring.rescore import rescore_runs
from memaudit.store import Run, ScorePass, Store, dumps, loads, open_store, select_runs
from memaudit.store.artifacts import ARTIFACTS, ORACLE_KEY, artifact_rows, copy_inputs, oracle_row, oracle_rows
from memaudit.store.judges import CONTROL_TABLES
from memaudit.tables.metrics import run_models
from memaudit.tables.paper import compute_tables, without_measurements
from memaudit.types import DEFAULT_VARIANT, EMBED_TRUNCATED, EMBED_TRUNCATED_TEXTS, KIND, UNLABELLED

from memaudit.utilization.act import utilization_runs

SHOWN = 120  # characters of a differing value shown in the report line
SCRATCH_PREFIX = "memaudit-replay-"
# Replay contacts no model: every answer comes from the cache, so the transport's limits are not
# the user's to give (`replay` takes no --timeout, --rpm or --tpm; memaudit/cli/score_cmds.py).
FROM_CACHE = {"cache": "replay", "timeout": Settings.timeout, "rpm": None, "tpm": None}


@dataclass
class Replayed:
    """What a replay compared (artifact rows per table, both sides counted) and its first
    difference (None: identical)."""
    runs: list[str]
    compared: dict[str, int]
    difference: str | None

    def summary(self) -> str:
        counts = ", ".join(f"{n} {table}" for table, n in self.compared.items() if n)
        return f"{len(self.runs)} run(s) ({', '.join(self.runs)}): {counts}"


async def replay_runs(settings: Settings, runs=None) -> str | None:
    """None when every artifact of the runs is reproduced exactly, else the first difference as one
    line. Raises CacheMiss (naming the role) when the cache lacks a call the pipeline needs."""
    return (await replay(settings, runs)).difference


async def replay(settings: Settings, runs=None) -> Replayed:
    """Re-execute the recorded rollout runs (every one when `runs` is None) from the cache and
    compare. The model settings come from what the runs recorded, not from `settings` (whose store,
    seed, prompts and embedder are used). Nothing to re-execute is a BadInput, never `identical`."""
    remove_stale(Path(tempfile.gettempdir()), SCRATCH_PREFIX)  # left by killed replays: hundreds of MB
    with tempfile.TemporaryDirectory(prefix=owned_prefix(SCRATCH_PREFIX)) as scratch_dir:
        scratch = Path(scratch_dir) / "replay.db"
        async with open_store(settings.db, create=False) as recorded:
            chosen = await _replayable(recorded, runs)
            sources = sorted({r.config.transcripts for r in chosen} - {r.run for r in chosen} - {None})
            model_settings = await _recorded_settings(recorded, chosen, settings)
            async with open_store(scratch) as store:
                await copy_inputs(store, recorded.path, transcripts_of=sources)
            async with open_runtime(replace(model_settings, db=scratch, **FROM_CACHE)) as rt:
                try:
                    await _reexecute(rt, recorded, chosen)
                except CacheMiss as miss:  # the client's advice names an option replay users never passed
                    raise CacheMiss(miss.role, miss.key, "replay re-executes from the store's cache alone, "
                                    "and it does not hold this call") from None
                await rt.store.flush()
                names = [r.run for r in chosen]
                compared = {table: len(await artifact_rows(recorded, table, names)) for table in ARTIFACTS}
                return Replayed(names, compared, await first_difference(recorded, rt.store, names))


async def _replayable(recorded: Store, runs: list[str] | None) -> list[Run]:
    chosen = await select_runs(recorded, runs, origin="rollout")
    if not chosen:
        imported = await select_runs(recorded, None, origin="import")
        raise BadInput("nothing to replay: the store holds no recorded rollout run"
                       + (f" ({len(imported)} imported run(s) have no calls to re-execute)" if imported else ""),
                       file=str(recorded.path))
    return chosen


async def _recorded_settings(recorded: Store, runs: list[Run], settings: Settings) -> Settings:
    """The settings the runs were made with, from their provenance (rollout and scoring roles,
    panel judges) and call log (roles without provenance); runs recorded before provenance replay
    under `settings`."""
    found: dict[str, dict] = {}
    judges: dict[str, dict] = {}
    seen: dict[str, str] = {}
    seen_judges: dict[str, str] = {}
    for run in runs:
        if run.config.provenance:
            merge_roles(found, run.config.provenance.get("roles", {}), f"run {run.run}", seen)
        for p in await recorded.scores.passes(run.run):
            provenance = p.config.scorer.get("provenance", {})
            if p.variant == DEFAULT_VARIANT:  # a variant's role changes are its own
                merge_roles(found, provenance.get("roles", {}), f"run {run.run}", seen)
            merge_roles(judges, provenance.get("judges", {}), f"run {run.run}", seen_judges, "judge ")
    for check in await recorded.judges.checks(sorted({r.bench for r in runs})):
        provenance, where = check["config"].get("provenance", {}), f"judge-check of {check['bench']}"
        merge_roles(found, provenance.get("roles", {}), where, seen)
        merge_roles(judges, provenance.get("judges", {}), where, seen_judges, "judge ")
    if not found:
        return settings
    backend = next(iter(found.values())).get("backend")
    logged = {}
    for run in runs:
        for group, model in (await run_models(recorded, run.run)).items():
            if group not in found and ", " not in model:
                logged[group] = {"model": model, "backend": backend}
    return recorded_settings(settings, found, logged, judges, embeddings=recorded_embeddings(runs))


async def _reexecute(rt: Runtime, recorded: Store, runs: list[Run]) -> None:
    """Every stage in pipeline order (memaudit/stages.py), each re-executing what the runs recorded
    of it. Runs that were (or could have been) executed together are re-executed together, so a large
    replay keeps the recorded concurrency; the cache makes the grouping irrelevant to the result."""
    for stage in STAGES:
        await REEXECUTE[stage](rt, recorded, runs)


async def _rollouts(rt: Runtime, recorded: Store, runs: list[Run]) -> None:
    """Live runs go first: a teacher-forced run reads the transcripts its source re-executed."""
    rollouts: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: r.config.transcripts is not None):
        rollouts.setdefault(dumps([run.bench, run.config.to_json()]), []).append(run)
    for group in rollouts.values():
        bench = await rt.store.benchmarks.load(group[0].bench)
        prompts = recorded_dir((group[0].config.provenance or {}).get("prompts"))
        await rollout_runs(with_prompts(rt, prompts), bench, [r.system for r in group], group[0].config)


async def _scoring(rt: Runtime, recorded: Store, runs: list[Run]) -> None:
    """The default passes (rescoring variants start from their predictions), evolving targets too."""
    scoring: dict[str, list[str]] = {}
    for run in runs:
        default = await recorded.scores.passes(run.run, DEFAULT_VARIANT)
        for (window, dims, prompts, panel, every), group in _by_settings(default).items():
            modes = sorted({p.mode for p in group})
            ks = sorted({p.k for p in group if p.mode == "retrieve"}) or [5]
            scoring.setdefault(dumps([modes, ks, window, dims, prompts, loads(panel), every]), []).append(run.run)
    for signature, group in scoring.items():
        modes, ks, window, dims, prompts, panel, every = loads(signature)
        scoring_rt = with_prompts(rt, prompts)
        await score_runs(scoring_rt, group, modes, ks=tuple(ks), context_window=window, dims=dims,
                         panel=Panel.recorded(scoring_rt.llm, panel), every_target=every)
        await score_evolving(scoring_rt, group, modes, ks=tuple(ks), context_window=window)


async def _rescoring(rt: Runtime, recorded: Store, runs: list[Run]) -> None:
    for run in runs:
        variants = {p.variant: p.config.rescore for p in await recorded.scores.passes(run.run)
                    if p.variant != DEFAULT_VARIANT}
        for variant, change in sorted(variants.items()):
            await rescore_runs(rt, [run.run], variant, judge_model=change.judge_model, judge_prompt=change.judge_prompt,
                               reader_model=change.reader_model, panel=Panel.recorded(rt.llm, change.panel))


async def _attribution(rt: Runtime, recorded: Store, runs: list[Run]) -> None:
    attribution: dict[str, list[str]] = {}
    for run in runs:
        modes = await recorded.attributions.modes(run.run)
        recorded_passes = await recorded.attributions.passes(run.run)
        prompts = next((recorded_dir(p["config"].get("prompts")) for p in recorded_passes), None)
        failed_steps = any(p["config"].get(FAILED_STEPS) for p in recorded_passes)
        if modes:
            attribution.setdefault(dumps([modes, prompts, failed_steps]), []).append(run.run)
    for signature, group in attribution.items():
        modes, prompts, failed_steps = loads(signature)
        await attribute_runs(with_prompts(rt, prompts), group, modes, failed_steps=failed_steps)


async def _utilization(rt: Runtime, recorded: Store, runs: list[Run]) -> None:
    """Know/Act passes (memaudit/utilization/), after scoring: Know is read from the reconstructions."""
    utilization: dict[tuple, list[str]] = {}
    for run in runs:
        for k, config in await recorded.utilization.passes(run.run):
            utilization.setdefault((k, config["threshold"]), []).append(run.run)
    for (k, threshold), group in utilization.items():
        await utilization_runs(rt, group, k=k, threshold=threshold)


async def _judge_checks(rt: Runtime, recorded: Store, runs: list[Run]) -> None:
    """The judge-check passes of the runs' benchmarks (memaudit/scoring/judge_check.py)."""
    for check in await recorded.judges.checks(sorted({r.bench for r in runs})):
        cfg, bench = check["config"], check["bench"]
        # the cells the store checked: a shard's store (`judge-check --shard`) holds only its own
        cells = {(bench, user) for user, _, _ in await recorded.judges.controls(bench)}
        await run_judge_check(rt, [bench], Panel.recorded(rt.llm, cfg), per_category=check["per_category"],
                              seed=check["seed"], thresholds=Thresholds(cfg["max_false_pass"], cfg["min_pass"]),
                              cells=cells)


# What re-executes each stage (tests/test_stages.py: every stage has one).
REEXECUTE = {ROLLOUT: _rollouts, SCORE: _scoring, RESCORE: _rescoring, ATTRIBUTE: _attribution,
             UTILIZATION: _utilization, JUDGE_CHECK: _judge_checks}


def recorded_dir(prompts: dict | None) -> str | None:
    """The prompt directory a run or pass recorded (memaudit's own: wherever it is installed now);
    None when it recorded none (made before prompt directories were recorded): the current one."""
    if not prompts:
        return None
    return str(PROMPTS_DIR) if prompts.get("name") == "bundled" else prompts.get("dir")


def _by_settings(passes: list[ScorePass]) -> dict[tuple, list[ScorePass]]:
    """Passes grouped by the options they were scored with (a run may mix windows, dims, prompt
    directories: `--prompts`, recorded in the pass, or judge panels: the panel as JSON text), and
    whether every target was judged (a pass scored with the pack before that lacks the field)."""
    out: dict[tuple, list[ScorePass]] = {}
    for p in passes:
        prompts = recorded_dir(p.config.scorer.get("prompts"))
        panel = dumps(recorded_fields(p.config.scorer))
        every = bool(p.config.scorer.get(EVERY_TARGET))
        out.setdefault((p.config.context_window, p.config.dims, prompts, panel, every), []).append(p)
    return out


async def first_difference(recorded: Store, replayed: Store, runs: list[str]) -> str | None:
    for table, key in ARTIFACTS.items():
        found = _compare(table, key, await artifact_rows(recorded, table, runs),
                         await artifact_rows(replayed, table, runs))
        if found:
            return found
    # Oracle verdicts are shared with runs that were not replayed: compare the ones replay made.
    replayed_oracle = await oracle_rows(replayed)
    recorded_oracle = [row for row in [await oracle_row(recorded, [r[c] for c in ORACLE_KEY])
                                       for r in replayed_oracle] if row is not None]
    found = _compare("oracle", ORACLE_KEY, recorded_oracle, replayed_oracle)
    if found:
        return found
    # Control answers and their verdicts belong to benchmarks, not runs.
    benches = sorted({r.bench for r in await select_runs(recorded, runs)})
    before, after = await recorded.judges.control_rows(benches), await replayed.judges.control_rows(benches)
    for table, key in CONTROL_TABLES.items():
        found = _compare(table, key, before[table], after[table])
        if found:
            return found
    # Intervals are a function of the compared rows: skip the resampling. Wall times are this
    # machine's measurements, not artifacts: they are not compared.
    return _compare_json("tables", without_measurements(await compute_tables(recorded, runs, bootstrap=0)),
                         without_measurements(await compute_tables(replayed, runs, bootstrap=0)))


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
            old, new = _comparable(table, column, value), _comparable(table, column, after[k][column])
            old, new = _as_recorded(old, new) if (table, column) in (("snapshots", "state"), ("snapshots", "items")) \
                else (old, new)
            if old != new and not (column in ADDED_LATER and old is None):
                return f"{where} column {column}: {_difference(old, new)}"
    return None


# Fields of a scoring pass's config that are not inputs of its numbers, left out of the comparison:
# `overflow_count` says how this machine measures prompts against the window (it names the tokenizer
# file found here, or its absence; an overflow decided differently shows in the reconstructions'
# statuses, which are compared), and the role fields replay does not rebuild (provenance.NOT_REPLAYED).
# Passes scored before either was recorded lack them.
NOT_COMPARED = ("overflow_count",)


# Fields a later version of memaudit records, which a store recorded before holds nothing of (a
# snapshot state's count of the texts its embedding model cut, its column, Table 2's sum; the
# `kind` of each stored item): where the recorded side has none, the replayed one is not compared,
# so an older store still replays identical; where it has one, it is compared like every field.
ADDED_LATER = (EMBED_TRUNCATED, EMBED_TRUNCATED_TEXTS, KIND)
ITEMS_BY_KIND = "items_by_kind"  # the health table's count of the items' kinds (tables/health.py)


def _as_recorded(recorded, replayed):
    """A memory snapshot's state or items, both sides parsed, the replayed one as the recorded one
    has it: the fields a later memaudit added to an adapter's state (the clock each restored message
    found, tool-request counts, the texts its embedding model cut) or to its items (their `kind`,
    ADDED_LATER) are not in a snapshot an earlier memaudit recorded, and are compared only where the
    recorded one has them. Every field the recorded snapshot has is compared as it is."""
    old, new = (loads(v) if isinstance(v, str) else v for v in (recorded, replayed))
    if isinstance(old, dict) and isinstance(new, dict):
        new = {name: value for name, value in new.items() if name in old}
    return old, _without_added(old, new)


def _without_added(old, new):
    if isinstance(old, dict) and isinstance(new, dict):
        return {k: _without_added(old.get(k), v) for k, v in new.items() if not (k in ADDED_LATER and k not in old)}
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [_without_added(a, b) for a, b in zip(old, new)]
    return new


def _comparable(table: str, column: str, value):
    if (table, column) != ("score_passes", "config") or not isinstance(value, str):
        return value
    config = loads(value)
    if not isinstance(config, dict):
        return config
    config = {k: v for k, v in config.items() if k not in NOT_COMPARED}
    roles = (config.get("provenance") or {}).get("roles")
    if isinstance(roles, dict):
        roles = {name: {k: v for k, v in role.items() if k not in NOT_REPLAYED} if isinstance(role, dict)
                 else role for name, role in roles.items()}
        config["provenance"] = {**config["provenance"], "roles": roles}
    return config


def _difference(recorded, replayed) -> str:
    """What differs in one column: for a config (an object) the fields that differ, by name, not two
    strings cut off before them."""
    named = differences(recorded, replayed) if isinstance(recorded, dict) and isinstance(replayed, dict) else []
    if named:
        return "; ".join(d.replace(", now ", ", replayed ") for d in named)
    return f"recorded {_short(recorded)} vs replayed {_short(replayed)}"


def _compare_json(path: str, recorded, replayed) -> str | None:
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for name in sorted(recorded.keys() | replayed.keys()):
            if (name in ADDED_LATER and recorded.get(name) is None) or (
                    name == ITEMS_BY_KIND and set(recorded.get(name) or ()) <= {UNLABELLED}):
                continue  # a figure of a store recorded before it existed (its items had no kind)
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
