"""The lazy command line: `memaudit --help` lists every command from the table in memaudit.cli,
and importing the CLI (or resolving `score`) loads none of the heavy libraries."""
from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

import memaudit.cli
from memaudit.cli import COMMANDS, cli, main

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("numpy", "torch", "sentence_transformers", "aiohttp", "rich", "httpx")


def command_modules() -> dict[str, click.Command]:
    """Every command the *_cmds modules define, by name, with the module that defines it."""
    found = {}
    for info in pkgutil.iter_modules(memaudit.cli.__path__):
        if info.name.endswith("_cmds"):
            for command in importlib.import_module(f"memaudit.cli.{info.name}").COMMANDS:
                found[command.name] = (info.name, command)
    return found


def loaded_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter has imported after running `code`."""
    probe = f"import sys\n{code}\nprint(__import__('json').dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_the_table_names_every_command_and_its_module():
    assert {name: module for name, (module, _) in COMMANDS.items()} == \
        {name: module for name, (module, _) in command_modules().items()}


@pytest.mark.parametrize("limit", [30, 45, 80, 300])
def test_the_table_summaries_shorten_as_the_docstrings_do(limit):
    for name, (_, command) in command_modules().items():
        summary = click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit)
        assert summary == command.get_short_help_str(limit), name


def test_help_lists_every_command(capsys):
    main(["--help"])
    listed = capsys.readouterr().out.split("Commands:\n", 1)[1]
    assert [line.split()[0] for line in listed.splitlines() if line.strip()] == sorted(COMMANDS)
    assert "Slot-fill and judge every bank entry" in listed


def test_a_command_resolves_to_its_own_definition():
    ctx = click.Context(cli)
    for name, (_, command) in command_modules().items():
        assert cli.get_command(ctx, name) is command
    assert cli.get_command(ctx, "ghost") is None


def test_an_unknown_command_still_gets_suggestions(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["scor"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "No such command 'scor'" in err and "'score'" in err


def test_importing_the_cli_and_printing_help_load_no_heavy_library():
    assert loaded_after("import memaudit.cli") == []
    assert loaded_after("from memaudit.cli import main\nmain(['--help'])") == []


def test_the_score_path_loads_no_numpy_torch_or_rich():
    """What `score --mode dump_all` imports before its first call: the model client's aiohttp comes
    with the first call, numpy with the first embedding (retrieve mode)."""
    code = "import memaudit.cli.score_cmds, memaudit.runtime, memaudit.scoring.recovery"
    assert loaded_after(code) == []
