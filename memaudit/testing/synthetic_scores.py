"""Stores built directly from rows: small hand-made runs for the unit tests and a bulk
50-user × 5-system store for the table and statistics performance scripts."""
from __future__ import annotations

import numpy as np

from memaudit.roles import AGENT
from memaudit.store import (BankEntryRow, BenchmarkRow, CallRow, CallUseRow, EpisodeRow, RunRow, SnapshotRow, Store,
                            TaskRow, TurnRow, UserRow)
from memaudit.types import (ATTRIBUTION_LABELS, BANK_COUNTS, CATEGORIES, DEFAULT_VARIANT, MODES, RUBRIC, Attribution,
                            Reconstruction)


def bench_rows(bench: str, users: list[str], tasks: int = 31) -> dict[str, list]:
    """A benchmark whose users each have the 31-entry bank and `tasks` tasks (one per entry)."""
    dims = [(c, f"{c}_{i}") for c in CATEGORIES for i in range(BANK_COUNTS[c])]
    rows: dict[str, list] = {"benchmarks": [BenchmarkRow(bench, "synthetic")], "users": [], "bank_entries": [],
                             "tasks": []}
    for pos, user in enumerate(users):
        rows["users"].append(UserRow(bench, user, {}, pos))
        for i, (c, d) in enumerate(dims):
            rows["bank_entries"].append(BankEntryRow(bench, user, i, c, d, f"short {d}", f"explains {d}"))
        for i, (c, d) in enumerate(dims[:tasks], start=1):
            rows["tasks"].append(TaskRow(bench, user, i, f"task {i}", c, d, f"short {d}"))
    return rows


def dimensions() -> list[tuple[str, str]]:
    return [(c, f"{c}_{i}") for c in CATEGORIES for i in range(BANK_COUNTS[c])]


async def insert(store: Store, rows: dict[str, list]) -> None:
    """Bulk insert, tables in the order given: one executemany per table, all in one transaction."""
    await store.add(row for table in rows.values() for row in table)


def run_row(run: str, system: str, bench: str = "b", origin: str = "rollout", config: dict | None = None) -> RunRow:
    return RunRow(run, system, bench, origin, config)


def recon_row(run, mode, user, category, dimension, score, status="ok", k=None, variant=DEFAULT_VARIANT,
              snapshot_task=None) -> Reconstruction:
    """`snapshot_task`: the snapshot the row read; fresh rows name the user's final one."""
    k = (0 if mode == "dump_all" else 5) if k is None else k
    return Reconstruction(run, mode, k, variant, user, category, dimension, "expl", "truth", {}, "label", "reason",
                          score, "judge", status, None, snapshot_task)


def episode_row(run, user, idx, end_reason="satisfied", n_turns=2) -> EpisodeRow:
    return EpisodeRow(run, user, idx, f"task {idx}", end_reason, n_turns)


def turn_row(run, user, idx, turn, score=None, fallback=0) -> TurnRow:
    return TurnRow(run, user, idx, turn, "reply", "followup", "text", score, [], bool(fallback))


def snapshot_row(run, user, idx, n_items, avg_chars) -> SnapshotRow:
    return SnapshotRow(run, user, idx, {}, [], n_items, avg_chars)


def attribution_row(run, mode, user, category, dimension, label, k=None, variant=DEFAULT_VARIANT) -> Attribution:
    k = (0 if mode == "dump_all" else 5) if k is None else k
    return Attribution(run, mode, k, variant, user, category, dimension, label, None, [], None, "")


def call_rows(key: str, role: str, prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> CallRow:
    return CallRow(key, role, "m", "{}", "{}", True, prompt, completion, cached, 0.0, "", reasoning)


def call_use_row(run: str, artifact: str, key: str, role: str, from_cache: bool = False) -> CallUseRow:
    return CallUseRow(run, artifact, key, role, from_cache)


SYSTEMS = ("amem", "longctx_full", "mem0", "memt", "nomem")


def synthetic_release(users: int = 50, systems=SYSTEMS, seed: int = 0, *, variants=(DEFAULT_VARIANT,)) -> dict:
    """Rows of a full study: every system × user × 31 tasks with turns, final snapshots, both modes
    scored, attributions and call records. System i recovers a little more than system i+1."""
    rng = np.random.default_rng(seed)
    user_ids = [f"user_{i:03d}" for i in range(1, users + 1)]
    rows = bench_rows("b", user_ids)
    rows.update({name: [] for name in ("runs", "episodes", "turns", "snapshots", "reconstructions",
                                       "attributions", "calls", "call_uses")})
    dims = dimensions()
    grid = np.asarray(RUBRIC.scores)
    for s, system in enumerate(systems):
        run = f"{system}_pooled_{users}"
        rows["runs"].append(run_row(run, system, config={"tasks": None}))
        for user in user_ids:
            skill = rng.normal(0.6 - 0.03 * s, 0.06)
            for idx in range(1, 32):
                n = int(rng.integers(1, 5))
                rows["episodes"].append(episode_row(run, user, idx, "satisfied" if rng.random() < 0.97 else "max_turns",
                                                    n))
                for t in range(1, n + 1):
                    score = None if rng.random() < 0.1 else float(rng.integers(3, 6))
                    rows["turns"].append(turn_row(run, user, idx, t, score))
                    key = f"{run}:{user}:{idx}:{t}"
                    rows["calls"].append(call_rows(key, AGENT, 900, 120, 300))
                    rows["call_uses"].append(call_use_row(run, f"episode:{user}:{idx}", key, AGENT))
            items, chars = int(rng.integers(50, 200)), float(rng.normal(400, 50))
            rows["snapshots"].append(snapshot_row(run, user, 31, items, chars))
            for mode in MODES:
                k = 0 if mode == "dump_all" else 5
                for variant in variants:
                    shift = 0.0 if variant == DEFAULT_VARIANT else 0.05
                    for c, d in dims:
                        p = float(np.clip(skill - (0.07 if mode == "retrieve" else 0.0) + shift, 0, 1))
                        score = float(grid[np.clip(rng.binomial(4, p), 0, 4)])
                        rows["reconstructions"].append(recon_row(run, mode, user, c, d, score, k=k, variant=variant,
                                                                          snapshot_task=31))
                        if variant == DEFAULT_VARIANT:
                            label = "ok" if RUBRIC.is_recovered(score) else ATTRIBUTION_LABELS[int(rng.integers(1, 5))]
                            rows["attributions"].append(attribution_row(run, mode, user, c, d, label, k=k))
    return rows
