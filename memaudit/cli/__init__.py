"""The command line: parse, call the library, print. Only this package knows about terminals
and exit codes; the library raises MemauditError, printed here as one line (exit 2)."""
from __future__ import annotations

import signal
import sys

import click

from memaudit.cli.common import GLOBAL_OPTIONS
from memaudit.errors import MemauditError, scrub


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli(**_):
    """memaudit: how much of a user can be reconstructed from an agent's memory."""


for _option in GLOBAL_OPTIONS:
    cli = _option(cli)

from memaudit.cli import (bench_cmds, calls_cmds, demo_cmds, generate_cmds, memory_cmds,  # noqa: E402
                          report_cmds, rollout_cmds, score_cmds, system_cmds, tables_cmds, utilization_cmds)

for _module in (bench_cmds, generate_cmds, rollout_cmds, score_cmds, utilization_cmds, tables_cmds, report_cmds,
                memory_cmds, calls_cmds, system_cmds, demo_cmds):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def _terminate(signum, frame):
    raise KeyboardInterrupt  # SIGTERM unwinds like Ctrl-C: servers stop, pending cache rows commit


def main(argv=None) -> None:
    signal.signal(signal.SIGTERM, _terminate)
    try:
        cli.main(args=argv, prog_name="memaudit", standalone_mode=False)
    except MemauditError as exc:
        click.echo(f"memaudit: error: {scrub(str(exc))}", err=True)  # no credential reaches a terminal or log
        sys.exit(2)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("memaudit: interrupted", err=True)
        sys.exit(130)
