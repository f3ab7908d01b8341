"""Reading, validating and resolving benchmark instances in the release layout."""
from __future__ import annotations

import orjson
import pytest

from memaudit.bench.instances import load_release_benchmark, read_release, resolve_bench, validate_bench
from memaudit.bench.pool import load_pool
from memaudit.errors import BadInput
from memaudit.store import open_store
from memaudit.testing.release_fixture import BANKS, POOL, write_release
from memaudit.types import CATEGORIES, CATEGORY_DEFINITIONS

TASKS = "benchmark_data/CustomTasksPooledFinal"


def _edit(path, fn):
    data = orjson.loads(path.read_bytes())
    fn(data)
    path.write_bytes(orjson.dumps(data))


def test_reads_users_banks_tasks_and_pool_sources(tmp_path):
    bench = load_release_benchmark(write_release(tmp_path / "rel"), name="fx")
    assert bench.name == "fx" and [u.id for u in bench.users] == ["user_001", "user_002", "user_003"]
    user = bench.users[0]
    assert len(user.bank) == 31 and user.persona["name"] == "user_001"
    assert user.bank[0].source == "fixture framework"
    tasks = bench.tasks["user_001"]
    assert [t.index for t in tasks] == list(range(1, 32))
    assert tasks[0].review == {"pipeline_note": "accepted"}
    assert set(bench.pool) == set(CATEGORIES) and bench.source == "fixture pool"


def test_name_defaults_to_the_directory(tmp_path):
    assert load_release_benchmark(write_release(tmp_path / "my_release")).name == "my_release"


def test_clean_release_has_no_problems(tmp_path):
    assert read_release(write_release(tmp_path / "rel"))[1] == []


def test_damaged_release_lists_every_problem_with_file_user_and_field(tmp_path):
    root = write_release(tmp_path / "rel", users=4)

    def damage_banks(data):
        skills = data["users"][0]["memory_bank"]["skill_memory"]
        skills.pop()  # user_001: 6 skill entries
        data["users"][1]["memory_bank"]["hobby_memory"] = [{"dimension": "x", "short": "y", "explanation": "z"}]
    _edit(root / BANKS, damage_banks)
    _edit(root / TASKS / "user_003.json", lambda d: d["tasks"][4].pop("task"))
    (root / TASKS / "user_004.json").unlink()
    (root / TASKS / "user_002.json").write_text('{"user_id": "user_002", "tasks": [{"task": "trunc')

    problems = read_release(root)[1]
    text = "\n".join(problems)
    assert f"{BANKS}: user user_001: memory_bank.skill_memory: 6 entries, expected 7" in problems
    assert f"{BANKS}: user user_002: memory_bank.hobby_memory: unknown category" in problems
    assert f"{TASKS}/user_003.json: user user_003: tasks[4].task: missing text" in problems
    assert f"{TASKS}/user_004.json: user user_004: missing task file for a user of the bank" in problems
    assert f"{TASKS}/user_002.json" in text and "malformed JSON" in text
    with pytest.raises(BadInput, match="user_004"):
        load_release_benchmark(root)


def test_truncated_bank_file_is_named(tmp_path):
    root = write_release(tmp_path / "rel")
    (root / BANKS).write_bytes((root / BANKS).read_bytes()[:500])
    problems = read_release(root)[1]
    assert len(problems) == 1 and BANKS in problems[0] and "malformed JSON" in problems[0]


def test_task_targets_must_match_the_bank_and_cover_it(tmp_path):
    root = write_release(tmp_path / "rel", users=1)

    def damage(data):
        data["tasks"][0]["target_short"] = "something else"
        data["tasks"][1]["target_category"] = "self_model"
        data["tasks"][2]["target_dimension"] = data["tasks"][3]["target_dimension"]
        data["user_id"] = "user_009"
    _edit(root / TASKS / "user_001.json", damage)
    problems = read_release(root)[1]
    where = f"{TASKS}/user_001.json: user user_001"
    assert f"{where}: user_id: 'user_009' does not match the file name" in problems
    assert any(p.startswith(f"{where}: tasks[0].target_short") for p in problems)
    assert any(p.startswith(f"{where}: tasks[1].target_category") for p in problems)
    assert any("no task targets skill_memory/'skill_axis_2'" in p for p in problems)
    assert any("targeted by several tasks (3, 4)" in p for p in problems)


def test_dims_are_checked_against_the_release_pool_or_a_given_one(tmp_path):
    root = write_release(tmp_path / "rel", users=1)
    _edit(root / POOL, lambda d: d["skill_memory"].pop(0))
    problems = read_release(root)[1]
    assert problems == [f"{BANKS}: user user_001: memory_bank.skill_memory[0].dimension: 'skill_axis_0' "
                        "is not in the pool's skill_memory"]
    other = tmp_path / "pool.json"
    other.write_bytes((root / POOL).read_bytes())
    (root / POOL).unlink()
    assert read_release(root)[1] == []  # no pool: dimensions are not checked
    assert len(read_release(root, pool_path=other)[1]) == 1


def test_several_task_directories_need_a_choice(tmp_path):
    root = write_release(tmp_path / "rel", users=1)
    write_release(tmp_path / "rel", users=1, tasks_dir="Other")
    assert "several task directories (CustomTasksPooledFinal, Other)" in read_release(root)[1][0]
    assert read_release(root, tasks_dir="Other")[1] == []


def test_pool_and_category_definitions():
    pool = load_pool()
    assert set(pool) == set(CATEGORIES) and all(len(v) >= 20 for v in pool.values())
    assert set(CATEGORY_DEFINITIONS) == set(CATEGORIES)
    assert all("NOT" in d for d in CATEGORY_DEFINITIONS.values())


@pytest.mark.anyio
async def test_resolve_imports_a_directory_once_and_then_reads_the_store(tmp_path):
    root = write_release(tmp_path / "sub" / "rel")
    async with open_store(tmp_path / "s.db") as store:
        bench = await resolve_bench(store, str(root))
        assert bench.name == "rel"
        assert await resolve_bench(store, str(root)) == bench
        assert await resolve_bench(store, "rel") == bench
        assert await store.benchmarks.list() == [{"name": "rel", "users": 3, "tasks": 93}]
        with pytest.raises(BadInput, match="unknown benchmark 'nope'"):
            await resolve_bench(store, "nope")
        _edit(root / BANKS, lambda d: d["users"][0]["base_profile"].update(age=99))
        with pytest.raises(BadInput, match="different benchmark named 'rel'"):
            await resolve_bench(store, str(root))


@pytest.mark.anyio
async def test_validate_a_stored_benchmark(tmp_path):
    root = write_release(tmp_path / "sub" / "rel", users=1)  # not under the cwd: "rel" is then a name
    async with open_store(tmp_path / "s.db") as store:
        await resolve_bench(store, str(root))
        assert await validate_bench(store, "rel") == []
        small_pool = tmp_path / "pool.json"
        _edit(root / POOL, lambda d: d["self_model"].clear())
        small_pool.write_bytes((root / POOL).read_bytes())
        problems = await validate_bench(store, "rel", pool_path=small_pool)
        assert len(problems) == 5 and problems[0].startswith("benchmark rel: user user_001: memory_bank.self_model")
