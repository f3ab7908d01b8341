"""Carry-over and bother rate on a hand-built transcript set, checked against a hand computation;
an imported release without pref_judge/ gets n/a with the reason, and tables still render."""
from __future__ import annotations

import shutil

import pytest

from memaudit.release.importer import import_release
from memaudit.store import open_store
from memaudit.tables.carryover import NO_RECORDS
from memaudit.tables.paper import compute_tables
from memaudit.tables.paper_render import render
from memaudit.testing.release_fixture import write_release
from memaudit.types import BANK_COUNTS, BankEntry, Benchmark, Episode, Task, Turn, User

PREF = "assistance_preference"


def user(uid: str) -> User:
    bank = tuple(BankEntry(cat, f"{cat}_{i}", f"stance {i}", "Why.") for cat, n in BANK_COUNTS.items()
                 for i in range(n))
    return User(uid, {}, bank)


def bench() -> Benchmark:
    """user_a discloses pref 0 in task 1 and pref 1 in task 2; user_b pref 0 in task 1."""
    users = (user("user_a"), user("user_b"))
    tasks = {"user_a": tuple(Task("user_a", i, f"task {i}", PREF if i <= 2 else "skill_memory",
                                  f"{PREF}_{i - 1}" if i <= 2 else f"skill_memory_{i}", "s") for i in range(1, 5)),
             "user_b": tuple(Task("user_b", i, f"task {i}", PREF if i == 1 else "skill_memory",
                                  f"{PREF}_0" if i == 1 else f"skill_memory_{i}", "s") for i in range(1, 3))}
    return Benchmark("hand", users, tasks)


def ours(scores: dict) -> list[dict]:
    """Per-pref records as the rollout writes them (1-based idx and the dimension)."""
    return [{"idx": i + 1, "dimension": f"{PREF}_{i}", "score": s} for i, s in scores.items()]


def turn(i, feedback, per_pref=(), fallback=False) -> Turn:
    return Turn(i, f"reply {i}", feedback, "user text", None, list(per_pref), fallback)


def episodes(run: str, honouring: bool) -> list[Episode]:
    good = (lambda s: s) if honouring else (lambda s: 1 if isinstance(s, int) else s)
    a = [
        [turn(1, "satisfied", ours({0: good(5)}))],
        [turn(1, "correction", ours({0: good(4), 1: good(2)})), turn(2, "followup")],
        [turn(1, "too_deep", ours({0: "na", 1: good(5)})), turn(2, "too_shallow"), turn(3, "satisfied")],
        [turn(1, "correction", ours({0: good(3), 1: good(4)}), fallback=True), turn(2, "satisfied", ours({0: 5}))],
    ]
    # user_b's records in the published shape: 1-based idx only, no dimension.
    b = [[turn(1, "satisfied", [{"idx": 1, "score": good(5)}])],
         [turn(1, "correction", [{"idx": 1, "score": 1}]), turn(2, "satisfied")]]
    return [Episode(run, uid, i, f"task {i}", turns, "satisfied")
            for uid, eps in (("user_a", a), ("user_b", b)) for i, turns in enumerate(eps, 1)]


async def stored(db) -> None:
    async with open_store(db) as store:
        await store.benchmarks.save(bench())
        for run, system, honouring in (("mem", "longctx_full", True), ("nomem", "nomem", False)):
            await store.runs.ensure(run, system, "hand")
            rows = []
            for ep in episodes(run, honouring):
                rows += store.episodes.statements(ep, None)
            await store.write(rows)


@pytest.mark.anyio
async def test_carryover_and_bother_equal_a_hand_computation(tmp_path):
    await stored(tmp_path / "hand.db")
    async with open_store(tmp_path / "hand.db") as store:
        tables = await compute_tables(store, bootstrap=500)
    rows = {r["run"]: r for r in tables["carryover"]}
    mem, nomem = rows["mem"], rows["nomem"]
    # user_a: pref 0 later in episodes 2, 3, 4 -> rated 4 (yes), na (left out), 3 (no);
    #         pref 1 later in episodes 3, 4 -> 5 (yes), 4 (yes)               => 3 / 4
    #         corrective turns: pref 0 pairs 1 + 2 + 0 (the fallback turn is no user), pref 1 pairs 2 + 0
    #                                                                          => 5 / 5 pairs
    # user_b: pref 0 later in episode 2 -> 1 (no) => 0 / 1; one correction in one pair => 1
    assert mem["prefs"] == 3
    assert mem["carryover"] == pytest.approx((3 / 4 + 0) / 2)
    assert mem["bother_rate"] == pytest.approx((5 / 5 + 1) / 2)
    assert nomem["carryover"] == 0.0 and nomem["carryover_vs_nomem"] is None
    versus = mem["carryover_vs_nomem"]
    assert versus["nomem"] == "nomem" and versus["users"] == 2
    assert versus["diff"] == pytest.approx(0.375) and versus["p"] == 1.0  # two users: every sign pattern ties
    assert mem["na_reason"] is None
    assert "Preference carry-over" in render(tables, "md")


@pytest.mark.anyio
async def test_an_imported_release_without_pref_judge_says_na_and_why(tmp_path):
    root = write_release(tmp_path / "release", users=2, runs=("nomem_pooled_50", "amem_pooled_50"))
    shutil.rmtree(root / "pref_judge")
    async with open_store(tmp_path / "imported.db") as store:
        await import_release(store, root)
        tables = await compute_tables(store, bootstrap=100)
        for fmt in ("md", "latex", "csv", "json"):
            assert render(tables, fmt)
    assert [r["run"] for r in tables["carryover"]] == ["amem_pooled_50", "nomem_pooled_50"]
    for row in tables["carryover"]:
        assert row["carryover"] is None and row["carryover_ci95"] is None and row["carryover_vs_nomem"] is None
        assert row["na_reason"] == NO_RECORDS and "pref_judge/" in row["na_reason"]
    assert tables["utilization"] == []
