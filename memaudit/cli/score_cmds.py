"""Commands: score, attribute, rescore, replay — recovery scoring, failure attribution, frozen
rescoring and the reproducibility check."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from memaudit.cli.common import current_settings, global_options, run, shard_option, split_list
from memaudit.errors import BadInput
from memaudit.types import DEFAULT_VARIANT

MODE_CHOICE = click.Choice(["dump_all", "retrieve", "both"])
RUNS_HELP = "comma-separated run ids (default: every run in the store)"


def _modes(mode: str) -> list[str]:
    return ["dump_all", "retrieve"] if mode == "both" else [mode]


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(part) for part in split_list(text) or ())
    except ValueError:
        raise BadInput(f"--k expects integers such as 5 or 1,3,5,10, got {text!r}", field="k") from None
    if not ks or min(ks) < 1:
        raise BadInput("--k values must be at least 1", field="k")
    return ks


async def _chosen_runs(store, runs: list[str] | None) -> list[str]:
    from memaudit.store import select_runs

    return [r.run for r in await select_runs(store, runs)]


async def _print_scores(store, runs: list[str], variant: str) -> None:
    for run_id in runs:
        for r in await store.scores.summary(run_id, variant):
            mean = "n/a" if r["mean"] is None else f"{r['mean']:.3f}"
            k = "" if r["mode"] == "dump_all" else f" k={r['k']}"
            click.echo(f"{run_id} {r['mode']}{k} ({variant}): {r['n']} targets, {r['ok']} ok, "
                       f"{r['overflow']} overflow, {r['failed']} failed, flat mean score {mean}")


@click.command("score")
@click.option("--mode", type=MODE_CHOICE, required=True, help="read operator(s)")
@click.option("--k", "k_text", default="5", show_default=True, help="top-k for retrieve; `1,3,5,10` runs a sweep")
@click.option("--runs", default=None, help=RUNS_HELP)
@click.option("--context-window", type=click.IntRange(min=1), default=None,
              help="the reader's context window in tokens (default: the slot_fill role's configured window)")
@click.option("--dims", type=click.Choice(["all", "targeted"]), default="all", show_default=True,
              help="targeted = only bank entries whose task ran (a partial score)")
@shard_option
@global_options
def score(mode, k_text, runs, context_window, dims, shard):
    """Slot-fill and judge every bank entry of every user with episodes, from the final memory."""
    run(_score, current_settings(), _modes(mode), _ks(k_text), split_list(runs), context_window, dims, shard)


async def _score(settings, modes, ks, runs, context_window, dims, shard):
    from memaudit.runtime import open_runtime
    from memaudit.scoring.recovery import score_runs

    async with open_runtime(settings, shard=shard) as rt:
        chosen = await _chosen_runs(rt.store, runs)
        skipped = await score_runs(rt, chosen, modes, ks=ks, context_window=context_window, dims=dims)
        for line in skipped:
            click.echo(f"memaudit: {line}", err=True)
        await _print_scores(rt.store, chosen, DEFAULT_VARIANT)


@click.command("attribute")
@click.option("--mode", type=MODE_CHOICE, required=True, help="access mode(s) whose targets to attribute")
@click.option("--runs", default=None, help=RUNS_HELP)
@shard_option
@global_options
def attribute(mode, runs, shard):
    """Stages 0-2 of failure attribution for every target scored below 0.75."""
    run(_attribute, current_settings(), _modes(mode), split_list(runs), shard)


async def _attribute(settings, modes, runs, shard):
    from memaudit.runtime import open_runtime
    from memaudit.scoring.attribution import attribute_runs

    async with open_runtime(settings, shard=shard) as rt:
        chosen = await _chosen_runs(rt.store, runs)
        await attribute_runs(rt, chosen, modes)
        for run_id in chosen:
            counts: dict = {}
            for r in await rt.store.attributions.label_counts(run_id, DEFAULT_VARIANT):
                counts.setdefault((r["mode"], r["k"]), []).append(f"{r['label']} {r['n']}")
            for (m, k), parts in counts.items():
                suffix = "" if m == "dump_all" else f" k={k}"
                click.echo(f"{run_id} {m}{suffix}: {', '.join(parts)}")


@click.command("rescore")
@click.option("--variant", required=True, help="name of the new scoring variant")
@click.option("--judge-model", default=None, help="model for the recovery judge")
@click.option("--judge-prompt", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="another prompt file for the recovery judge (same placeholders)")
@click.option("--reader-model", default=None, help="model for the slot-filling reader (slots are filled again)")
@click.option("--runs", default=None, help=RUNS_HELP)
@global_options
def rescore(variant, judge_model, judge_prompt, reader_model, runs):
    """Frozen rescoring: re-judge the default predictions (or re-fill them) as a new variant."""
    run(_rescore, current_settings(), variant, judge_model, str(judge_prompt) if judge_prompt else None,
        reader_model, split_list(runs))


async def _rescore(settings, variant, judge_model, judge_prompt, reader_model, runs):
    from memaudit.runtime import open_runtime
    from memaudit.scoring.rescore import rescore_runs

    async with open_runtime(settings) as rt:
        chosen = await _chosen_runs(rt.store, runs) if runs is not None else await rt.store.scores.scored_runs()
        await rescore_runs(rt, chosen, variant, judge_model=judge_model, judge_prompt=judge_prompt,
                           reader_model=reader_model)
        await _print_scores(rt.store, chosen, variant)


@click.command("replay")
@click.option("--runs", default=None, help="comma-separated run ids (default: every recorded rollout run)")
@global_options
def replay(runs):
    """Re-execute the recorded runs from the call cache only and compare every artifact."""
    from memaudit.replay import replay_runs

    difference = run(replay_runs, current_settings(), split_list(runs))
    if difference is not None:
        click.echo(difference)
        sys.exit(1)  # click returns Exit codes from main() without exiting; a difference must fail the shell
    click.echo("identical")


COMMANDS = [score, attribute, rescore, replay]
