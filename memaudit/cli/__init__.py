"""The command line: parse, call the library, print. Only this package knows about terminals
and exit codes; the library raises MemauditError, printed here as one line (exit 2).

A command's module is imported only when that command runs: `score` never pays for numpy, rich
tables or the memory adapters that other commands load, and `memaudit --help` imports none of them."""
from __future__ import annotations

import importlib
import sys

import click

from memaudit.cli.common import ATTRIBUTE_HELP, GLOBAL_OPTIONS, Group, Interrupted, stop_on_signals
from memaudit.errors import MemauditError, scrub

# name -> (module in memaudit.cli, the first paragraph of the command's docstring). The summary
# lets `memaudit --help` list every command without importing any; tests/cli/test_lazy_cli.py
# checks that it still matches the docstring.
COMMANDS = {
    "attribute": ("score_cmds", ATTRIBUTE_HELP),
    "batch": ("batch_cmds", "Batch API scoring: the state of the batches sent, collecting their results, sending "
                            "again."),
    "bench": ("bench_cmds", "Benchmark instances: validate, import, list."),
    "check-adapter": ("adapter_cmds", "Run the adapter contract checks against a memory system, on the scripted "
                                      "fake model: writes and reads with the right types, snapshot/restore round "
                                      "trip, determinism."),
    "cache": ("system_cmds", "The call cache in the store: statistics, and merging caches from other machines."),
    "calls": ("calls_cmds", "Every recorded model call (oldest first), with its prompt and response."),
    "cost": ("study_cmds", "What each run cost: tokens per stage and role, priced on demand and in batch, beside "
                           "its plan."),
    "demo": ("demo_cmds", "The bundled sample benchmark end to end: rollout, scoring in both modes, attribution, "
                          "tables, report."),
    "export": ("release_cmds", "Write runs and their benchmark in the published release layout."),
    "generate": ("generate_cmds", "Generate benchmark users with the anti-fishing critic/editor pass (--seed sets "
                                  "the base seed)."),
    "generate-act": ("utilization_cmds", "Act scenarios for every bank entry that has none yet, checked by the "
                                         "blind anti-fishing critic."),
    "human": ("judge_cmds", "Human grades from the audit page of `memaudit view --audit N`."),
    "import-release": ("release_cmds", "Import a published release: its benchmark and its runs (history, memory, "
                                     "recon_judge, attribution, oracle), as runs named after their directories."),
    "judge-check": ("judge_cmds", "Control answers with a known grade (truth, paraphrase; another user's value, a "
                                  "vague non-answer, the reversed value) sent to every judge: flags lenient and "
                                  "harsh judges."),
    "memory": ("memory_cmds", "Work with dumped memory stores."),
    "merge": ("study_cmds", "Merge the stores of a sharded study (SHARD.db...) into one study store, all or "
                            "nothing."),
    "plan": ("study_cmds", "Estimate the calls, tokens and cost of a study from the flags its commands take; "
                           "recorded in the store for `cost`."),
    "prompts": ("prompts_cmds", "Prompt directories: build the published pack; list the prompts in effect."),
    "replay": ("score_cmds", "Re-execute the recorded runs from the call cache only and compare every artifact. "
                             "The model settings are the ones the runs recorded: no model option is needed, no "
                             "model is contacted."),
    "rescore": ("score_cmds", "Frozen rescoring: re-judge the default predictions (or re-fill them) as a new "
                              "variant."),
    "rollout": ("rollout_cmds", "Run (or resume) episodes: the assistant with each memory system helps the "
                                "simulated users, or, with --transcripts, each memory system is fed the recorded "
                                "episodes of a run. One process writes a run at a time: a second rollout of the "
                                "same run is refused as busy."),
    "score": ("score_cmds", "Slot-fill and judge every bank entry of every user with episodes, from the final "
                            "memory."),
    "serve": ("system_cmds", "Run an OpenAI-compatible model server on loopback in the foreground (Ctrl-C stops "
                             "it)."),
    "systems": ("adapter_cmds", "Every memory system: its name, where it comes from (built-in or package==version), "
                                "the deployed library it runs and its version, and whether it loads (with the "
                                "error when it does not; for a library that is not installed, the extra that "
                                "brings it)."),
    "tables": ("tables_cmds", "The paper's tables (2, 3, 4, footprint, memory health, gap, tokens) with intervals "
                              "and paired comparisons."),
    "utilization": ("utilization_cmds", "Know vs Act: is what the memory knows used when the user asks for help?"),
    "view": ("report_cmds", "Write a static HTML report: tables whose cells drill down to users, targets and "
                            "transcripts."),
}


class LazyGroup(Group):
    """The top-level group: COMMANDS names every command; its module is imported on resolution."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module = importlib.import_module(f"memaudit.cli.{COMMANDS[name][0]}")
        return next(command for command in module.COMMANDS if command.name == name)

    def resolve_command(self, ctx: click.Context, args: list[str]):
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.NoSuchCommand as exc:
            # click suggests close names from the registered commands, of which this group has none
            raise click.exceptions.NoSuchCommand(exc.command_name, possibilities=COMMANDS, ctx=ctx) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click lists commands (the summary shortened to the width left), from COMMANDS."""
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, click.Command(name, help=summary).get_short_help_str(limit))
                for name, (_, summary) in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli(**_):
    """memaudit: how much of a user can be reconstructed from an agent's memory.

    The options here are every global setting, taken before any command (a command that does not
    read one ignores it); `memaudit COMMAND --help` lists the ones that command reads."""


for _option in GLOBAL_OPTIONS:
    cli = _option(cli)


def _fail(exc: MemauditError):
    click.echo(f"memaudit: error: {scrub(str(exc))}", err=True)  # no credential reaches a terminal or log
    sys.exit(2)


def main(argv=None) -> None:
    stop_on_signals()
    try:
        cli.main(args=argv, prog_name="memaudit", standalone_mode=False)
    except MemauditError as exc:
        _fail(exc)
    except BaseExceptionGroup as group:  # concurrent work that failed: the first failure is the message
        leaf = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        if not isinstance(leaf, MemauditError):
            raise
        _fail(leaf)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        click.echo(f"memaudit: stopped by {exc}; {exc.after}", err=True)
        sys.exit(128 + exc.signum)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("memaudit: interrupted", err=True)
        sys.exit(130)
