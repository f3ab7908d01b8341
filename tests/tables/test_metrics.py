"""Per-user metrics checked against hand computations on stores built row by row."""
from __future__ import annotations

import anyio
import pytest

from memaudit.store import Store
from memaudit.tables import metrics
from memaudit.testing.synthetic_scores import (bench_rows, call_rows, call_use_row, episode_row, insert, run_row,
                                               snapshot_row, turn_row)


def with_store(tmp_path, rows, fn):
    async def main():
        store = await Store.open(tmp_path / "m.db")
        try:
            await insert(store, rows)
            return await fn(store)
        finally:
            await store.close()
    return anyio.run(main)


def base_rows():
    rows = bench_rows("b", ["u1", "u2"])
    rows.update({"runs": [run_row("r", "amem")], "episodes": [], "turns": [], "snapshots": [], "calls": [],
                 "call_uses": []})
    return rows


def test_a_c_d_e_by_hand(tmp_path):
    rows = base_rows()
    rows["episodes"] += [episode_row("r", "u1", 1, "satisfied", 2), episode_row("r", "u1", 2, "max_turns", 25),
                         episode_row("r", "u1", 3, "failed", 1), episode_row("r", "u2", 1, "satisfied", 3)]
    rows["turns"] += [turn_row("r", "u1", 1, 1, 4.0), turn_row("r", "u1", 1, 2, None),
                      turn_row("r", "u1", 2, 1, 5.0), turn_row("r", "u1", 3, 1, 2.5, fallback=1),
                      turn_row("r", "u2", 1, 1, None), turn_row("r", "u2", 1, 2, None)]
    rows["snapshots"] += [snapshot_row("r", "u1", 1, 3, 10.0), snapshot_row("r", "u1", 3, 7, 42.5)]
    users = with_store(tmp_path, rows, lambda s: metrics.user_metrics(s, "r"))
    u1, u2 = users["u1"], users["u2"]
    assert u1.episodes == 3 and u1.A == pytest.approx(1 / 3)
    assert u1.C == pytest.approx(28 / 3) and u1.C_satisfied == 2
    assert u1.D == pytest.approx((4.0 + 5.0 + 2.5) / 3)  # the unscorable turn does not count
    assert (u1.items, u1.chars) == (7, 42.5)  # the last snapshot, not the first
    assert (u1.failed_episodes, u1.simulator_fallbacks) == (1, 1)
    assert u2.D is None  # no scorable turn: null, never 0
    assert (u2.items, u2.chars) == (None, None)
    assert u2.A == 1.0 and u2.C == 3 and u2.C_satisfied == 3


def test_satisfied_only_turns_are_null_without_satisfied_episodes(tmp_path):
    rows = base_rows()
    rows["episodes"] += [episode_row("r", "u1", 1, "max_turns", 25)]
    users = with_store(tmp_path, rows, lambda s: metrics.user_metrics(s, "r"))
    assert users["u1"].A == 0.0 and users["u1"].C_satisfied is None


def test_b_is_category_balanced():
    # skill: 7 targets, 6 × 1.0 and 1 × 0.0 -> 6/7; every other category 0.0 on its entries
    rows = [("skill_memory", 1.0, "ok")] * 6 + [("skill_memory", 0.0, "ok")]
    rows += [(c, 0.0, "ok") for c in ("knowledge_memory", "episodic_memory", "self_model", "assistance_preference")]
    rec = metrics.user_recovery("u", rows)
    assert rec.categories["skill_memory"] == pytest.approx(6 / 7)
    assert rec.B == pytest.approx((6 / 7) / 5)  # not the flat mean 6/11
    assert (rec.overflow, rec.failed) == (0, 0)


def test_overflow_scores_zero_and_is_counted_failed_is_excluded_and_counted():
    rows = [("skill_memory", 1.0, "ok"), ("skill_memory", None, "overflow"),
            ("self_model", 1.0, "ok"), ("self_model", None, "failed"), ("self_model", None, "ok")]
    rec = metrics.user_recovery("u", rows)
    assert rec.categories["skill_memory"] == 0.5
    assert rec.categories["self_model"] == 1.0
    assert rec.categories["episodic_memory"] is None  # nothing scored there: left out of the mean
    assert rec.B == pytest.approx(0.75)
    assert (rec.overflow, rec.failed) == (1, 2)
    assert metrics.user_recovery("u", [("self_model", None, "failed")]).B is None


@pytest.mark.parametrize("values, q, expected", [
    ([1, 2, 3, 4], 0.5, 2),            # lower middle value, never (2 + 3) / 2
    ([3, 1, 2], 0.5, 2),
    (list(range(1, 11)), 0.9, 9),      # ceil(0.9 · 10) − 1 = index 8 -> 9th smallest
    (list(range(1, 12)), 0.9, 10),     # ceil(9.9) − 1 = index 9
    ([5], 0.9, 5),
    ([4, None, 2], 0.5, 2),
])
def test_lower_order_statistic(values, q, expected):
    assert metrics.lower_quantile(values, q) == expected


def test_lower_order_statistic_of_nothing_is_null():
    assert metrics.lower_quantile([], 0.5) is None


@pytest.mark.parametrize("role, group", [("agent", "agent"), ("oracle", "attribution"), ("disclosure", "attribution"),
                                         ("elicitation", "attribution"), ("memory.extract", "memory"),
                                         ("memory:evolve", "memory"), ("slot_fill", "slot_fill")])
def test_usage_groups(role, group):
    assert metrics.usage_group(role) == group


def test_tokens_count_each_call_once_per_run(tmp_path):
    rows = base_rows()
    rows["runs"].append(run_row("imported", "amem", origin="import"))
    rows["calls"] += [call_rows("k1", "agent", 100, 10, 40), call_rows("k2", "oracle", 50, 5, reasoning=3)]
    rows["call_uses"] += [call_use_row("r", "episode:u1:1", "k1", "agent"),
                          call_use_row("r", "episode:u1:2", "k1", "agent", True), call_use_row("r", "attr:x", "k2", "oracle")]

    async def both(store):
        return await metrics.token_usage(store, "r"), await metrics.token_usage(store, "imported")
    used, imported = with_store(tmp_path, rows, both)
    assert used == {"agent": {"calls": 1, "prompt_tokens": 100, "completion_tokens": 10, "cached_tokens": 40,
                              "reasoning_tokens": 0},
                    "attribution": {"calls": 1, "prompt_tokens": 50, "completion_tokens": 5, "cached_tokens": 0,
                                    "reasoning_tokens": 3}}
    assert imported is None
