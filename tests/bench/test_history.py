"""Evolving bank entries: the `history` field, its checks, the store and the release layout."""
from __future__ import annotations

import orjson
import pytest

from memaudit.bench.history import changes, superseded, user_at, value_at
from memaudit.bench.instances import SAMPLE_DIR, load_release_benchmark, read_release
from memaudit.bench.pool import BUNDLED_POOL
from memaudit.cli import main
from memaudit.bench.export import write_benchmark
from memaudit.store import open_store
from memaudit.testing.release_fixture import BANKS, write_release

TASKS = "benchmark_data/CustomTasksPooledFinal"
DIM = "skill_axis_0"  # the first skill entry of the fixture; its task is task 1
V0 = "user_001 stance on skill_memory 0"  # its value in the fixture


def _set_history(root, history, *, short=None, user=0):
    data = orjson.loads((root / BANKS).read_bytes())
    entry = data["users"][user]["memory_bank"]["skill_memory"][0]
    entry["history"] = history
    if short is not None:
        entry["short"] = short
    (root / BANKS).write_bytes(orjson.dumps(data))


def _evolving(root):
    """user_001's first skill entry: its fixture value from task 1, replaced at task 12."""
    _set_history(root, [{"short": "user_001 stance on skill_memory 0", "valid_from_task": 1, "op": "add"},
                        {"short": "now coaches others at it", "explanation": "Took a course.", "valid_from_task": 12,
                         "op": "update"}], short="now coaches others at it")
    return root


def test_an_evolving_entry_reads_validates_and_keeps_its_task_value(tmp_path):
    root = _evolving(write_release(tmp_path / "rel", users=1))
    bench, problems = read_release(root)
    assert problems == []
    entry = bench.users[0].bank[0]
    assert [v.op for v in entry.history] == ["add", "update"] and entry.short == "now coaches others at it"
    assert value_at(entry, 11).short == "user_001 stance on skill_memory 0"
    assert value_at(entry, 12).explanation == "Took a course."
    assert user_at(bench.users[0], 3).bank[0].short == "user_001 stance on skill_memory 0"
    assert [(c.dimension, c.version, c.valid_from_task) for c in changes(bench.users[0])] == [(DIM, 1, 12)]
    assert [i for i, _ in superseded(entry)] == [0]


BROKEN = {
    "out of order": ([{"short": V0, "valid_from_task": 1, "op": "add"},
                      {"short": "b", "valid_from_task": 9, "op": "update"},
                      {"short": "c", "valid_from_task": 5, "op": "update"}],
                     f"({DIM}): history[2].valid_from_task: task 5 is not after version 1's task 9"),
    "task range": ([{"short": V0, "valid_from_task": 1, "op": "add"},
                    {"short": "c", "valid_from_task": 40, "op": "update"}],
                   f"({DIM}): history[1].valid_from_task: task 40 is outside the user's tasks 1..31"),
    "update after delete": ([{"short": V0, "valid_from_task": 1, "op": "add"},
                             {"short": "no longer a", "valid_from_task": 4, "op": "delete"},
                             {"short": "c", "valid_from_task": 8, "op": "update"}],
                            f"({DIM}): history[2].op: update after a delete (version 1); only add can follow a delete"),
    "delete after delete": ([{"short": V0, "valid_from_task": 1, "op": "add"},
                             {"short": "no longer a", "valid_from_task": 4, "op": "delete"},
                             {"short": "c", "valid_from_task": 8, "op": "delete"}],
                            f"({DIM}): history[2].op: delete after a delete (version 1); only add can follow a delete"),
    "missing short": ([{"short": V0, "valid_from_task": 1, "op": "add"}, {"valid_from_task": 8, "op": "update"}],
                      f"({DIM}): history[1].short: missing text (every version needs a short)"),
}


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_bench_validate_refuses_each_kind_of_broken_history(tmp_path, kind, capsys):
    history, message = BROKEN[kind]
    root = write_release(tmp_path / "rel", users=1)
    _set_history(root, history, short=history[-1].get("short", ""))
    with pytest.raises(SystemExit) as exited:
        main(["bench", "validate", str(root)])
    assert exited.value.code == 1
    out = capsys.readouterr()
    expected = f"{BANKS}: user user_001: memory_bank.skill_memory[0] {message}"
    assert any(line.startswith(expected) for line in out.out.splitlines()), out.out
    assert "problem(s)" in out.err and "Traceback" not in out.err


def test_the_sample_validates_and_every_user_has_evolving_entries_over_the_categories(capsys):
    try:
        main(["bench", "validate", "sample"])
    except SystemExit as exc:
        assert not exc.code
    assert capsys.readouterr().out.strip() == "sample: ok"
    bench, problems = read_release(SAMPLE_DIR, pool_path=BUNDLED_POOL)
    assert problems == []
    for user in bench.users:
        evolving = [e for e in user.bank if e.history]
        assert len(evolving) == 6 and len({e.category for e in evolving}) == 5


def test_the_entry_short_must_be_the_current_value_and_the_first_version_an_add(tmp_path):
    root = write_release(tmp_path / "rel", users=1)
    _set_history(root, [{"short": V0, "valid_from_task": 1, "op": "update"}], short="b")
    problems = read_release(root)[1]
    assert any("history[0].op: the first version must be add, not update" in p for p in problems)
    assert any("the entry's short differs from the last version's" in p for p in problems)


@pytest.mark.anyio
async def test_store_and_export_keep_histories_and_static_entries_stay_static(tmp_path):
    bench = load_release_benchmark(_evolving(write_release(tmp_path / "rel", users=2)), name="evo")
    async with open_store(tmp_path / "s.db") as store:
        await store.benchmarks.save(bench)
        loaded = await store.benchmarks.load("evo")
    assert loaded == bench
    write_benchmark(loaded, tmp_path / "out")
    users = orjson.loads((tmp_path / "out" / BANKS).read_bytes())["users"]
    assert users[0]["memory_bank"]["skill_memory"][0]["history"][1] == {
        "short": "now coaches others at it", "explanation": "Took a course.", "valid_from_task": 12, "op": "update"}
    assert all("history" not in e for u in users[1:] for entries in u["memory_bank"].values() for e in entries)
    again = load_release_benchmark(tmp_path / "out", name="evo")  # (the export orders categories by name)
    assert [sorted(u.bank, key=lambda e: e.dimension) for u in again.users] == \
        [sorted(u.bank, key=lambda e: e.dimension) for u in bench.users]
