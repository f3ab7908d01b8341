"""FAMA and the stale-memory split on a hand-built case (numbers worked out by hand below)."""
from __future__ import annotations

import pytest

from memaudit.tables.evolving import fama, run_rows, target_rows
from memaudit.tables.paper import Bootstrap
from memaudit.types import EvolvingJudgment


def judged(user, category, dim, criterion, version, verdict, mode="dump_all", k=0):
    return EvolvingJudgment("r", mode, k, "default", user, category, dim, criterion, version, verdict, "", "ok")


def case():
    """user_a: skill d1 (present ✓, absent ✗), skill d2 (✓, ✓), self d3 (✗; ✓ ✗);
    user_b: episodic d4 (✓; no superseded value), preference d5 (✓; ✓ ✗). Store: d1 v0 held, d2 v0 not,
    d3 v0 and v1 held, d5 v0 not and v1 held."""
    rows = []
    for user, cat, dim, present, absent, store in (
            ("user_a", "skill_memory", "d1", True, [False], [True]),
            ("user_a", "skill_memory", "d2", True, [True], [False]),
            ("user_a", "self_model", "d3", False, [True, False], [True, True]),
            ("user_b", "episodic_memory", "d4", True, [], []),
            ("user_b", "assistance_preference", "d5", True, [True, False], [False, True])):
        current = len(absent)
        rows.append(judged(user, cat, dim, "current_present", current, present))
        rows += [judged(user, cat, dim, "stale_absent", v, a) for v, a in enumerate(absent)]
        rows += [judged(user, cat, dim, "stale_in_store", v, s, mode="store") for v, s in enumerate(store)]
    return rows


def test_fama_is_memoras_formula():
    assert fama([True], [False]) == {"MPA": 1.0, "FAA": 0.0, "lambda": 0.5, "FAMA": 0.5}
    assert fama([True], [True, False])["FAMA"] == pytest.approx(1 - 2 / 3 * 0.5)
    assert fama([False], [True, False])["FAMA"] == 0.0  # clipped at 0
    assert fama([True], []) == {"MPA": 1.0, "FAA": 1.0, "lambda": 0.0, "FAMA": 1.0}


def test_a_hand_built_case_matches_the_hand_computation():
    targets = target_rows("r", case())
    assert [(t["dimension"], t["FAMA"]) for t in targets] == [
        ("d1", 0.5), ("d2", 1.0), ("d3", 0.0), ("d4", 1.0), ("d5", pytest.approx(2 / 3))]
    (row,) = run_rows("r", targets, Bootstrap(0, 0))
    # per user, the mean over categories of the per-category means; then the mean over users
    assert row["FAMA"] == pytest.approx(((0.5 + 1.0) / 2 / 2 + 0.0 / 2 + (1.0 + 2 / 3) / 2) / 2)
    assert row["MPA"] == pytest.approx((0.5 + 1.0) / 2)
    assert row["FAA"] == pytest.approx(0.5) and row["stale_in_recovery"] == pytest.approx(0.5)
    assert row["stale_in_store"] == pytest.approx(((1 + 0) / 2 / 2 + 1.0 / 2 + (0.5)) / 2)
    assert row["users"] == 2 and row["targets"] == 5 and row["FAMA_ci95"] is None
    assert all(isinstance(row[m], float) for m in ("FAMA", "MPA", "FAA", "stale_in_store", "stale_in_recovery"))


def test_retrieve_uses_the_headline_k_and_failed_criteria_are_left_out():
    rows = [judged("u", "skill_memory", "d", "current_present", 1, True, "retrieve", 3),
            judged("u", "skill_memory", "d", "stale_absent", 0, False, "retrieve", 3),
            judged("u", "skill_memory", "d", "current_present", 1, True, "retrieve", 5),
            judged("u", "skill_memory", "d", "stale_absent", 0, None, "retrieve", 5)]
    (target,) = target_rows("r", rows)
    assert target["mode"] == "retrieve" and target["present"] == [True] and target["absent"] == []
    assert target["FAMA"] == 1.0
