"""The paper's tables (PROTOCOL §8) with honest intervals and paired comparisons (issue 8): their values.

`compute_tables` returns plain JSON-ready data (the `tables --format json` contract of CLI.md:
unrounded numbers, A as a percentage, null for a mode that was not scored);
memaudit/tables/paper_render.py turns it into md, latex, csv or json text. Aggregates are mean and
sample std (n − 1) over users; every interval is a user-level bootstrap of the mean with a fixed
seed, so tables are reproducible.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from memaudit.errors import BadInput
from memaudit.tables.judges import judges_section
from memaudit.store import Run, Store, select_runs
from memaudit.tables import carryover, evolving, health, metrics, stats, utilization
from memaudit.tables.columns import COMPARISONS, FOOTPRINT, GAP, PROMPTS, TABLE2, TABLE3, TABLE4, TOKENS, measured_keys
from memaudit.tables.metrics import ModeRecovery
from memaudit.types import ATTRIBUTION_LABELS, CATEGORIES, DEFAULT_VARIANT, MODES, USER_INGEST

DEFAULT_K = 5
ALPHA = 0.05
AS_RELEASED = "as released"  # an imported run's rollout, scores or labels: the published prompts


@dataclass
class RunData:
    run: str
    system: str
    bench: str
    users: dict  # user_id -> UserMetrics
    recovery: dict  # (mode, k) -> ModeRecovery
    attributions: dict  # (mode, k) -> label counts
    published_attributions: dict  # (mode, k) -> label counts as the published code would have made them
    tokens: dict | None  # role group -> usage; None without call records
    partial: bool
    models: dict = field(default_factory=dict)  # role group -> model name(s), from the call log
    memory_side: metrics.MemorySide | None = None  # wall times, calls and tokens of the memory system
    source_run: str | None = None  # teacher-forced: the run whose transcripts it replayed (A, C, D are its)
    ingest: str = USER_INGEST  # what a deployed library was given (rollout --ingest)

    def headline(self, mode: str) -> ModeRecovery | None:
        """The recovery Table 2 reports for a mode: k = 5 for retrieve when scored, else the
        smallest k scored (dump_all has k = 0)."""
        ks = sorted(k for m, k in self.recovery if m == mode)
        if not ks:
            return None
        return self.recovery[(mode, DEFAULT_K if DEFAULT_K in ks else ks[0])]

    def total_tokens(self) -> int | None:
        if self.tokens is None:
            return None
        return sum(g["prompt_tokens"] + g["completion_tokens"] for g in self.tokens.values())


async def compute_tables(store: Store, runs: list[str] | None = None, *, variant: str = DEFAULT_VARIANT,
                         bootstrap: int = stats.RESAMPLES, seed: int = 0, data: list[RunData] | None = None) -> dict:
    """All tables for the runs (default: every run in the store, sorted). `bootstrap` = 0 skips
    intervals and tests. `data`: the runs' run_data when the caller has read it already (the report
    reuses it for its pages)."""
    selected = await select_runs(store, runs)
    if data is None:
        data = [await run_data(store, run, variant) for run in selected]
    boot = Bootstrap(bootstrap, seed)
    tables = {
        "table2": [table2_row(d, boot) for d in data],
        "table3": [row for d in data for row in table3_rows(d, boot)],
        "table4": [row for d in data for row in table4_rows(d)],
        "footprint": [footprint_row(d) for d in data],
        "health": [await health.health_row(store, d, variant) for d in data],
        "gap": [gap_row(d) for d in data],
        "tokens": [row for d in data for row in token_rows(d)],
        "comparisons": comparisons(data, boot),
        "utilization": await utilization.utilization_rows(store, [r.run for r in selected], boot),
        "carryover": await carryover.carryover_rows(store, [r.run for r in selected], boot),
        "prompts": [row for info in selected for row in await prompt_rows(store, info, variant)],
        "judges": await judges_section(store, selected, resamples=bootstrap, seed=seed),
    }
    # Evolving banks only (issue 25): a store without evolving targets gets no such section.
    tables.update(await evolving.evolving_sections(store, [r.run for r in selected], boot, variant))
    mark_partial(tables, {d.run: d.partial for d in data})
    return tables


def mark_partial(tables: dict, partial: dict[str, bool]) -> None:
    """Every row of a run carries whether the run is partial, so each table marks it (columns.RUN)."""
    for name in DECLARED:
        for row in tables.get(name) or []:
            if "run" in row:
                row["partial"] = partial.get(row["run"], False)


async def prompt_rows(store: Store, info: Run, variant: str) -> list[dict]:
    """Which prompt directory (name, hash) each number of a run was made with: its rollout (A, C, D,
    memory), each scoring pass (B) and each attribution pass (Table 4)."""
    def row(stage, mode, k, prompts):
        prompts = prompts or {}
        return {"run": info.run, "stage": stage, "mode": mode, "k": k,
                "prompts": prompts.get("name", AS_RELEASED), "hash": prompts.get("hash")}
    rollout = (info.config.provenance or {}).get("prompts")
    rows = [row("rollout", None, None, rollout if info.origin == "rollout" else None)]
    rows += [row("score", p.mode, p.k, p.config.scorer.get("prompts"))
             for p in await store.scores.passes(info.run, variant)]
    rows += [row("attribute", p["mode"], p["k"], p["config"].get("prompts"))
             for p in await store.attributions.passes(info.run) if p["variant"] == variant]
    return rows


async def check_fresh(store: Store, run: str, variant: str = DEFAULT_VARIANT) -> None:
    """Refuse a run whose reconstructions read a memory snapshot that is not the user's final one
    (scored while the rollout was still writing): its B would sit beside a footprint of another store."""
    stale = [r for r in await store.scores.stale(run) if r["variant"] == variant]
    if stale:
        r = stale[0]
        read = "an unrecorded snapshot" if r["snapshot_task"] is None else f"the memory after task {r['snapshot_task']}"
        final = "no stored memory" if r["last"] is None else f"the final memory is after task {r['last']}"
        others = f" (and {len(stale) - 1} more user(s))" if len(stale) > 1 else ""
        raise BadInput(f"run {run}: {r['n']} reconstruction(s) of user {r['user_id']} read {read}, but {final}"
                       f"{others}; run `memaudit score` again to rescore them", field="runs")


async def run_data(store: Store, info: Run, variant: str = DEFAULT_VARIANT) -> RunData:
    run = info.run
    await check_fresh(store, run, variant)
    return RunData(run=run, system=info.system, bench=info.bench,
                   users=await metrics.user_metrics(store, run),
                   recovery=await metrics.recovery(store, run, variant=variant),
                   attributions=await metrics.attribution_counts(store, run, variant=variant),
                   published_attributions=await metrics.published_attribution_counts(store, run, variant=variant),
                   tokens=await metrics.token_usage(store, run),
                   partial=await is_partial(store, info, variant),
                   models=await metrics.run_models(store, run), source_run=info.config.transcripts,
                   ingest=info.config.ingest,
                   memory_side=await metrics.memory_side(store, run))


async def is_partial(store: Store, info: Run, variant: str) -> bool:
    """A run is partial when it ran fewer tasks than its benchmark has per user, or when it was
    scored only on the targets whose task ran (`dims="targeted"` in score_passes)."""
    tasks = info.config.tasks
    most = await store.benchmarks.most_tasks(info.bench)
    if tasks is not None and most is not None and tasks < most:
        return True
    return any(p.config.dims == "targeted" for p in await store.scores.passes(info.run, variant))


class Bootstrap:
    """Intervals and paired tests with one resample count and seed for the whole table set."""

    def __init__(self, resamples: int, seed: int):
        self.resamples, self.seed = resamples, seed

    def ci(self, values, scale: float = 1.0) -> list[float] | None:
        if self.resamples <= 0:
            return None
        ci = stats.bootstrap_ci(list(values), resamples=self.resamples, seed=self.seed)
        return None if ci is None else [ci[0] * scale, ci[1] * scale]

    def paired(self, diffs) -> tuple[list[float] | None, float | None]:
        if self.resamples <= 0:
            return None, None
        return (stats.paired_bootstrap_ci(diffs, resamples=self.resamples, seed=self.seed),
                stats.sign_flip_p(diffs, resamples=self.resamples, seed=self.seed))


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def _summary(prefix: str, values, boot: Bootstrap, scale: float = 1.0) -> dict:
    values = list(values)
    mean, std = stats.mean_std(values)
    return {prefix: _scaled(mean, scale), f"{prefix}_std": _scaled(std, scale),
            f"{prefix}_ci95": boot.ci(values, scale)}


def table2_row(d: RunData, boot: Bootstrap) -> dict:
    users = list(d.users.values())
    tokens = d.total_tokens()
    row = {"run": d.run, "system": d.system, "users": len(users), "partial": d.partial,
           "teacher_forced": d.source_run is not None, "source_run": d.source_run, "ingest": d.ingest}
    row.update(_summary("A", (u.A for u in users), boot, 100.0))
    row.update(_summary("D", (u.D for u in users), boot))
    row.update(_summary("C", (u.C for u in users), boot))
    row["C_satisfied"] = stats.mean_std([u.C_satisfied for u in users])[0]
    for mode in MODES:
        rec = d.headline(mode)
        if rec is None:
            row.update({f"B_{mode}": None, f"B_{mode}_std": None, f"B_{mode}_ci95": None,
                        f"overflow_{mode}": None, f"failed_{mode}": None})
        else:
            row.update(_summary(f"B_{mode}", rec.B().values(), boot))
            row[f"overflow_{mode}"], row[f"failed_{mode}"] = rec.overflow, rec.failed
        b = row[f"B_{mode}"]
        row[f"B_{mode}_per_Mtok"] = b / (tokens / 1e6) if b is not None and tokens else None
    retrieve = d.headline("retrieve")
    row["retrieve_k"] = retrieve.k if retrieve else None
    row["items"], row["items_std"] = stats.mean_std([u.items for u in users])
    row["chars"], row["chars_std"] = stats.mean_std([u.chars for u in users])
    row["failed_episodes"] = sum(u.failed_episodes for u in users)
    row["simulator_fallbacks"] = sum(u.simulator_fallbacks for u in users)
    row["pref_judge_failures"] = sum(u.pref_judge_failures for u in users)
    row["memory_write_failures"] = metrics.total_write_failures(u.memory_write_failures for u in users)
    row["embed_truncated"] = metrics.total_write_failures(u.embed_truncated for u in users)
    row["tokens"] = tokens
    row["models"] = d.models
    return row


def table3_rows(d: RunData, boot: Bootstrap) -> list[dict]:
    rows = []
    for mode in MODES:
        recs = [rec for (m, _), rec in d.recovery.items() if m == mode]
        if not recs:
            rows.append({"run": d.run, "system": d.system, "mode": mode, "k": None, "users": 0,
                         **{key: None for c in (*CATEGORIES, "overall") for key in (c, f"{c}_std", f"{c}_ci95")}})
        for rec in recs:
            row = {"run": d.run, "system": d.system, "mode": mode, "k": rec.k if mode == "retrieve" else None,
                   "users": sum(r.B is not None for r in rec.users.values())}
            for c in CATEGORIES:
                row.update(_summary(c, rec.category(c).values(), boot))
            row.update(_summary("overall", rec.B().values(), boot))
            rows.append(row)
    return rows


def table4_rows(d: RunData) -> list[dict]:
    rows = []
    for mode in MODES:
        found = [(k, counts) for (m, k), counts in d.attributions.items() if m == mode]
        if not found:
            rows.append({"run": d.run, "system": d.system, "mode": mode, "k": None,
                         **{label: None for label in ATTRIBUTION_LABELS}, "recovery_rate": None})
        for k, counts in found:
            published = d.published_attributions.get((mode, k), counts)
            rows.append({"run": d.run, "system": d.system, "mode": mode, "k": k if mode == "retrieve" else None,
                         **counts, "recovery_rate": recovery_rate(counts),
                         "published_equivalent": {**{label: published[label] for label in ATTRIBUTION_LABELS
                                                     if label != "overflow"},
                                                  "recovery_rate": recovery_rate(published)}})
    return rows


def recovery_rate(counts: dict) -> float | None:
    """Recovered / (recovered + memory failures)."""
    denominator = counts["ok"] + counts["memory_failure"]
    return counts["ok"] / denominator if denominator else None


def footprint_row(d: RunData) -> dict:
    """Footprint quantiles over users with the lower order statistic (metrics.lower_quantile), and
    what the memory system cost at rollout: the wall time of an episode's writes and of a read
    (p50/p95), its model calls and tokens per user (mean; None without call records), and the
    writes it lost."""
    items = [u.items for u in d.users.values()]
    chars = [u.chars for u in d.users.values()]
    side = d.memory_side or metrics.MemorySide([], [], {}, {})
    samples = {"writes": side.write_seconds, "searches": side.search_seconds, "startups": side.startup_seconds}
    recorded = d.tokens is not None and d.users

    def per_user(counts: dict) -> float | None:
        return sum(counts.get(user, 0) for user in d.users) / len(d.users) if recorded else None

    return {"run": d.run, "system": d.system, "users": sum(i is not None for i in items),
            "items_p50": metrics.lower_quantile(items, 0.5), "items_p90": metrics.lower_quantile(items, 0.9),
            "chars_p50": metrics.lower_quantile(chars, 0.5), "chars_p90": metrics.lower_quantile(chars, 0.9),
            "write_p50": metrics.lower_quantile(side.write_seconds, 0.5),
            "write_p95": metrics.lower_quantile(side.write_seconds, 0.95),
            "search_p50": metrics.lower_quantile(side.search_seconds, 0.5),
            "search_p95": metrics.lower_quantile(side.search_seconds, 0.95),
            "startup_p50": metrics.lower_quantile(side.startup_seconds, 0.5),
            "startup_max": max(side.startup_seconds, default=None),
            **{f"{name}_timed": len(values) for name, values in samples.items()}, "timed": side.timed(),
            "memory_calls": per_user(side.calls), "memory_tokens": per_user(side.tokens),
            "memory_write_failures": metrics.total_write_failures(u.memory_write_failures for u in d.users.values())}


def gap_row(d: RunData) -> dict:
    """Per-user B(dump_all) − B(retrieve) over the users scored in both modes."""
    dump, retrieve = d.headline("dump_all"), d.headline("retrieve")
    users, gaps = stats.paired_diffs(dump.B(), retrieve.B()) if dump and retrieve else ([], [])
    gaps = [float(g) for g in gaps]
    return {"run": d.run, "system": d.system, "users": len(users),
            "mean": sum(gaps) / len(gaps) if gaps else None, "median": metrics.lower_quantile(gaps, 0.5),
            "min": min(gaps) if gaps else None, "max": max(gaps) if gaps else None,
            "per_user": dict(zip(users, gaps))}


def token_rows(d: RunData) -> list[dict]:
    """One row per role group plus an `all` row; an imported run without call records gets a
    single `all` row of nulls (shown as n/a)."""
    if d.tokens is None:
        return [{"run": d.run, "system": d.system, "role": "all", "calls": None, "prompt_tokens": None,
                 "completion_tokens": None, "cached_tokens": None, "reasoning_tokens": None, "total_tokens": None}]
    rows = [{"run": d.run, "system": d.system, "role": role, **usage,
             "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
            for role, usage in d.tokens.items()]
    total = {key: sum(r[key] for r in rows)
             for key in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens",
                         "total_tokens")}
    return rows + [{"run": d.run, "system": d.system, "role": "all", **total}]


def comparisons(data: list[RunData], boot: Bootstrap) -> list[dict]:
    """Paired comparisons of per-user B: every pair of runs on the same benchmark per mode, and
    dump_all vs retrieve within each run. Holm adjusts within each family (one per mode, and one
    for the within-run gaps)."""
    families: list[list[dict]] = []
    for mode in MODES:
        scored = [(d, d.headline(mode)) for d in data if d.headline(mode) is not None]
        family = [_compare(mode, a.run, b.run, ra.B(), rb.B(), boot)
                  for (a, ra), (b, rb) in itertools.combinations(scored, 2) if a.bench == b.bench]
        families.append([c for c in family if c is not None])
    within = [_compare("dump_all-retrieve", d.run, d.run, d.headline("dump_all").B(), d.headline("retrieve").B(), boot)
              for d in data if d.headline("dump_all") and d.headline("retrieve")]
    families.append([c for c in within if c is not None])
    out = []
    for family in families:
        for c, adjusted in zip(family, stats.holm([c["p"] for c in family])):
            c["p_holm"] = adjusted
            c["significant"] = adjusted is not None and adjusted < ALPHA
            out.append(c)
    return out


def _compare(mode: str, a: str, b: str, values_a: dict, values_b: dict, boot: Bootstrap) -> dict | None:
    users, diffs = stats.paired_diffs(values_a, values_b)
    if not users:
        return None
    ci, p = boot.paired(diffs)
    return {"mode": mode, "a": a, "b": b, "users": len(users), "diff": float(diffs.mean()), "ci95": ci, "p": p}


# Every table of rows, by its section name, as declared (memaudit/tables/columns.py and beside its maths).
DECLARED = {"table2": TABLE2, "table3": TABLE3, "table4": TABLE4, "footprint": FOOTPRINT, "health": health.HEALTH,
            "gap": GAP, "tokens": TOKENS,
            "comparisons": COMPARISONS, "utilization": utilization.UTILIZATION, "carryover": carryover.CARRYOVER,
            "prompts": PROMPTS, "evolving": evolving.EVOLVING, "evolving_targets": evolving.EVOLVING_TARGETS}


MEASURED = {name: measured_keys(columns) for name, columns in DECLARED.items()}


def without_measurements(tables: dict) -> dict:
    """The tables without the wall times measured on the machine that made each run
    (tables/columns.py `Column.measured`): what two stores of one study agree on (a replay, shards
    merged, scoring during or after a rollout)."""
    return {name: [{k: v for k, v in row.items() if k not in MEASURED.get(name, ())} for row in rows]
            if isinstance(rows, list) else rows for name, rows in tables.items()}
