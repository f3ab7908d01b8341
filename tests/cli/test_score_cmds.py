"""The score-side commands: bad options are one line and exit 2."""
from __future__ import annotations

import pytest

from memaudit.cli import main


def run_cli(args, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["--db", "m.db", *args])
    return exit_info.value.code, capsys.readouterr().err


def test_bad_k_list_is_one_line(capsys):
    code, err = run_cli(["score", "--mode", "both", "--k", "1,three"], capsys)
    assert code == 2 and err.count("\n") == 1 and "--k expects integers" in err


@pytest.fixture
def store():
    """An empty store at m.db (the tests run in their own temp dir): the commands get past opening it."""
    import anyio

    from memaudit.store import open_store

    async def make():
        async with open_store("m.db"):
            pass
    anyio.run(make)


def test_rescore_without_a_change_is_one_line(capsys, store):
    code, err = run_cli(["rescore", "--variant", "v2"], capsys)
    assert code == 2 and "nothing to change" in err


def test_unknown_run_is_one_line(capsys, store):
    code, err = run_cli(["score", "--mode", "dump_all", "--runs", "ghost"], capsys)
    assert code == 2 and "unknown run 'ghost'" in err
