"""`bench validate` refuses every category outside the five, even one with an empty list."""
from __future__ import annotations

import orjson
import pytest

from memaudit.bench.instances import read_release
from memaudit.cli import main
from memaudit.testing.release_fixture import BANKS, write_release


def with_hobbies(root, entries):
    data = orjson.loads((root / BANKS).read_bytes())
    data["users"][1]["memory_bank"]["hobbies"] = entries
    (root / BANKS).write_bytes(orjson.dumps(data))


@pytest.mark.parametrize("entries", [[], [{"dimension": "x", "short": "y", "explanation": "z"}]])
def test_an_unknown_category_is_named_with_its_user(tmp_path, entries):
    root = write_release(tmp_path / "rel")
    with_hobbies(root, entries)
    assert read_release(root)[1] == [f"{BANKS}: user user_002: memory_bank.hobbies: unknown category"]


def test_bench_validate_refuses_an_empty_unknown_category(tmp_path, capsys):
    root = write_release(tmp_path / "rel")
    with_hobbies(root, [])
    with pytest.raises(SystemExit) as exit_info:
        main(["--db", str(tmp_path / "m.db"), "bench", "validate", str(root)])
    assert exit_info.value.code != 0
    assert "user user_002: memory_bank.hobbies: unknown category" in capsys.readouterr().out
