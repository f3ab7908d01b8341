"""Hostile releases and shared stores: ids that climb out of their directory, symlinks that point
elsewhere, ids too long for a file name. Each case is refused with a one-line error, and nothing
outside the release root or `--out` is read or written."""
from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3

import orjson
import pytest

from tests.cli_main import memaudit
from memaudit.testing.release_fixture import BANKS, write_release

RUN = "amem_pooled_50"
TASKS = "benchmark_data/CustomTasksPooledFinal"



def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("memaudit: error:") and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    return err


def tree(root) -> dict[str, str]:
    """Every file under root (symlinks not followed) with a digest of its bytes."""
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            out[os.path.relpath(path, root)] = "link" if os.path.islink(path) else \
                hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


@pytest.fixture
def release(tmp_path):
    """A one-run release under tmp_path/pub and a directory of decoys outside it."""
    root = write_release(tmp_path / "pub", users=2, runs=(RUN,))
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy(root / TASKS / "user_002.json", outside / "user_002.json")
    shutil.copytree(root / "history" / RUN / "user_001", outside / "history_user_001")
    shutil.copy(root / "memory" / RUN / "user_001" / "memories.json", outside / "memories.json")
    return root, outside


def rename_user(root, old: str, new: str) -> None:
    data = orjson.loads((root / BANKS).read_bytes())
    for user in data["users"]:
        if user["user_id"] == old:
            user["user_id"] = new
    (root / BANKS).write_bytes(orjson.dumps(data))


@pytest.mark.parametrize("user_id", ["../../../pwned", "team/alice", "a" * 300])
def test_unsafe_user_ids_are_refused_by_every_reader(release, tmp_path, capsys, user_id):
    root, outside = release
    rename_user(root, "user_002", user_id)
    # a decoy where the climbing id would lead: it must not be read
    (tmp_path / "pwned.json").write_bytes((outside / "user_002.json").read_bytes())
    db = tmp_path / "s.db"
    before = tree(tmp_path / "outside")

    assert memaudit("bench", "validate", root) == 1
    lines = capsys.readouterr().out.splitlines()
    assert any(BANKS in line and "users[1].user_id" in line and "not a safe id" in line for line in lines)
    for command in (["bench", "import", root, "--name", "x"], ["import-release", root],
                    ["rollout", "--bench", root, "--systems", "nomem", "--base-url", "http://127.0.0.1:9/v1",
                     "--model", "m"]):
        assert memaudit(*command, "--db", db) == 2
        err = one_line_error(capsys)
        assert "not a safe id" in err and BANKS in err
    assert not db.exists()  # refused before anything was written: no store file either
    assert tree(tmp_path / "outside") == before


@pytest.mark.parametrize("plant", ["task_file", "user_dir", "memory_file", "run_dir", "bank_file"])
def test_symlinks_out_of_the_release_are_refused(release, tmp_path, capsys, plant):
    root, outside = release
    if plant == "task_file":
        target, link = outside / "user_002.json", root / TASKS / "user_002.json"
    elif plant == "user_dir":
        target, link = outside / "history_user_001", root / "history" / RUN / "user_001"
    elif plant == "memory_file":
        target, link = outside / "memories.json", root / "memory" / RUN / "user_001" / "memories.json"
    elif plant == "run_dir":
        target, link = root / "history" / RUN, root / "history" / "evil_run"
        shutil.move(str(target), str(outside / "evil_history"))
        target = outside / "evil_history"
    else:
        shutil.move(str(root / BANKS), str(outside / "banks.json"))
        target, link = outside / "banks.json", root / BANKS
    if link.is_dir():
        shutil.rmtree(link)
    elif link.exists():
        link.unlink()
    link.symlink_to(target)
    assert memaudit("import-release", root, "--db", tmp_path / "s.db") == 2
    err = one_line_error(capsys)
    assert "resolves outside" in err and str(link.relative_to(root)) in err
    assert not (tmp_path / "s.db").exists()  # refused before anything was written: no store either


def test_a_tasks_dir_that_climbs_out_is_refused(release, tmp_path, capsys):
    root, _ = release
    assert memaudit("bench", "import", root, "--name", "x", "--tasks-dir", "../../outside",
                    "--db", tmp_path / "s.db") == 2
    assert "resolves outside" in one_line_error(capsys)


def test_a_run_directory_with_an_unsafe_name_is_refused(release, tmp_path, capsys):
    root, _ = release
    (root / "output" / "bad run!").mkdir()
    assert memaudit("import-release", root, "--db", tmp_path / "s.db") == 2
    err = one_line_error(capsys)
    assert "output/bad run!" in err and "run id" in err


def test_export_of_a_shared_store_with_a_climbing_user_id_writes_nothing(release, tmp_path, capsys):
    root, _ = release
    db = tmp_path / "s.db"
    assert memaudit("import-release", root, "--db", db) == 0
    with sqlite3.connect(db) as conn:  # someone else's store: ids nobody checked
        conn.execute("PRAGMA foreign_keys=OFF")
        for table in ("users", "bank_entries", "tasks", "episodes", "turns", "snapshots", "reconstructions"):
            conn.execute(f"UPDATE {table} SET user_id='../../../pwned' WHERE user_id='user_002'")
    capsys.readouterr()
    before = tree(tmp_path)
    out = tmp_path / "ex" / "out"
    assert memaudit("export", "--out", out, "--db", db) == 2
    err = one_line_error(capsys)
    assert "not a safe id" in err and "user" in err
    after = tree(tmp_path)
    assert {k: v for k, v in after.items() if not k.startswith("s.db")} == \
        {k: v for k, v in before.items() if not k.startswith("s.db")}


def test_export_into_a_directory_whose_symlink_points_out_is_refused(release, tmp_path, capsys):
    root, outside = release
    db = tmp_path / "s.db"
    assert memaudit("import-release", root, "--db", db) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    out.mkdir()
    (out / "history").symlink_to(outside)
    before = tree(outside)
    assert memaudit("export", "--out", out, "--db", db) == 2
    err = one_line_error(capsys)
    assert "resolves outside" in err and "history" in err
    assert tree(outside) == before
    assert os.listdir(out) == ["history"]  # refused before anything was written


@pytest.mark.parametrize("tag", ["x/../../../../esc", "a" * 300, "../up"])
def test_a_rollout_tag_that_is_not_a_safe_id_is_refused(tmp_path, capsys, tag):
    assert memaudit("rollout", "--bench", "sample", "--systems", "nomem", "--tag", tag,
                    "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--db", tmp_path / "s.db") == 2
    err = one_line_error(capsys)
    assert "not a safe id" in err and "tag" in err
    with sqlite3.connect(tmp_path / "s.db") as conn:
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_export_refuses_records_of_users_outside_the_benchmark(release, tmp_path, capsys):
    root, _ = release
    db = tmp_path / "s.db"
    assert memaudit("import-release", root, "--db", db) == 0
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute("UPDATE snapshots SET user_id='team/alice' WHERE user_id='user_002'")
    capsys.readouterr()
    out = tmp_path / "out"
    assert memaudit("export", "--out", out, "--db", db) == 2
    err = one_line_error(capsys)
    assert "not in benchmark" in err and "team/alice" in err
    assert not out.exists()
