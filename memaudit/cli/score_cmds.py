"""Commands: score, attribute, rescore, replay — recovery scoring, failure attribution, frozen
rescoring and the reproducibility check."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from memaudit.cli.batch_cmds import batched
from memaudit.cli.common import (
    ATTRIBUTE_HELP, MEMORY, MODEL, STORE, WORKERS, command, current_settings, global_options, run, split_list,
    stage_options)
from memaudit.errors import BadInput
from memaudit.stages import ATTRIBUTE, RESCORE, SCORE

MODE_CHOICE = click.Choice(["dump_all", "retrieve", "both"])
RUNS_HELP = "comma-separated run ids (default: every run in the store)"
MAX_K = 100_000  # far above any memory's size; a larger number would overflow the store's integers
JUDGES_HELP = ("a judge panel: comma-separated models (odd count), each graded target gets the median "
               "(default: [roles.recovery_judge] models in --config, else the one configured judge)")
REPEATS_HELP = "test–retest: ask each judge this many times with distinct seeds (repeat 1 is the one that counts)"


def panel_options(fn):
    """--judges and --repeats (score, rescore, judge-check)."""
    fn = click.option("--repeats", type=click.IntRange(min=1), default=1, show_default=True, help=REPEATS_HELP)(fn)
    return click.option("--judges", default=None, help=JUDGES_HELP)(fn)


def _modes(mode: str) -> list[str]:
    return ["dump_all", "retrieve"] if mode == "both" else [mode]


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(part) for part in split_list(text) or ())
    except ValueError:
        raise BadInput(f"--k expects integers such as 5 or 1,3,5,10, got {text!r}", field="k") from None
    if not ks or min(ks) < 1 or max(ks) > MAX_K:
        raise BadInput(f"--k values must be from 1 to {MAX_K}", field="k")
    return ks


async def _chosen_runs(store, runs: list[str] | None, *, origin: str | None = None) -> list[str]:
    """The runs named, or every run; a store with none is an error (never a silent exit 0)."""
    from memaudit.store import select_runs

    chosen = [r.run for r in await select_runs(store, runs, origin=origin)]
    if not chosen:
        raise BadInput("the store holds no runs; run `memaudit rollout` or `memaudit import-release` first",
                       file=str(store.path))
    return chosen


async def _print_scores(store, runs: list[str], variant: str) -> None:
    for run_id in runs:
        for r in await store.scores.summary(run_id, variant):
            mean = "n/a" if r["mean"] is None else f"{r['mean']:.3f}"
            k = "" if r["mode"] == "dump_all" else f" k={r['k']}"
            click.echo(f"{run_id} {r['mode']}{k} ({variant}): {r['n']} targets, {r['ok']} ok, "
                       f"{r['overflow']} overflow, {r['failed']} failed, flat mean score {mean}")


@command("score")
@click.option("--mode", type=MODE_CHOICE, required=True, help="read operator(s)")
@click.option("--k", "k_text", default="5", show_default=True, help="top-k for retrieve; `1,3,5,10` runs a sweep")
@click.option("--runs", default=None, help=RUNS_HELP)
@click.option("--context-window", type=click.IntRange(min=1), default=None,
              help="the reader's context window in tokens (default: the slot_fill role's configured window)")
@click.option("--dims", type=click.Choice(["all", "targeted"]), default="all", show_default=True,
              help="targeted = only bank entries whose task ran (a partial score)")
@stage_options(SCORE)
@panel_options
@global_options(uses=STORE + MODEL + MEMORY)
def score(mode, k_text, runs, context_window, dims, use_batch, batch_file, shard, judges, repeats):
    """Slot-fill and judge every bank entry of every user with episodes, from the final memory."""
    run(_score, current_settings(), _modes(mode), _ks(k_text), split_list(runs), context_window, dims,
        use_batch, batch_file, shard, split_list(judges), repeats)


async def _score(settings, modes, ks, runs, context_window, dims, use_batch=False, batch_file=None, shard=None,
                 judges=None, repeats=1):
    from memaudit.scoring.panel import Panel
    from memaudit.runtime import open_runtime
    from memaudit.scoring import evolving, recovery

    async with open_runtime(settings, create=False, shard=shard) as rt:
        panel = Panel.build(rt.llm, judges, repeats)
        chosen = await _chosen_runs(rt.store, runs)
        async with batched(rt, (*recovery.ROLES_CALLED, *evolving.ROLES_CALLED), use_batch, batch_file):
            skipped = await recovery.score_runs(rt, chosen, modes, ks=ks, context_window=context_window, dims=dims,
                                                panel=panel)
            # evolving targets only (a static run makes no call here); judged on the rows scored so far
            await evolving.score_evolving(rt, chosen, modes, ks=ks, context_window=context_window)
        for line in skipped:
            click.echo(f"memaudit: {line}", err=True)
        for role, counter in sorted(rt.llm.counted_by.items()):
            if counter is None:  # never silently guessed: say that the server's error decides
                click.echo(f"memaudit: {role}: no token count for model {rt.settings.role(role).model} (its "
                           f"server has no /tokenize and its tokenizer is not on this machine); overflow is "
                           f"decided by the server's context-length error", err=True)
        for run_id in chosen:
            await _print_scores(rt.store, [run_id], await recovery.pass_variant(rt, run_id))


@command("attribute", help=ATTRIBUTE_HELP)
@click.option("--mode", type=MODE_CHOICE, required=True, help="access mode(s) whose targets to attribute")
@click.option("--runs", default=None, help=RUNS_HELP)
@stage_options(ATTRIBUTE)
@global_options(uses=STORE + MODEL)
def attribute(mode, runs, use_batch, batch_file, shard):
    run(_attribute, current_settings(), _modes(mode), split_list(runs), use_batch, batch_file, shard)


async def _attribute(settings, modes, runs, use_batch=False, batch_file=None, shard=None):
    from memaudit.runtime import open_runtime
    from memaudit.scoring.attribution import ROLES_CALLED, attribute_runs
    from memaudit.scoring.recovery import pass_variant

    async with open_runtime(settings, create=False, shard=shard) as rt:
        chosen = await _chosen_runs(rt.store, runs)
        async with batched(rt, ROLES_CALLED, use_batch, batch_file):
            await attribute_runs(rt, chosen, modes)
        for run_id in chosen:
            counts: dict = {}
            for r in await rt.store.attributions.label_counts(run_id, await pass_variant(rt, run_id)):
                counts.setdefault((r["mode"], r["k"]), []).append(f"{r['label']} {r['n']}")
            for (m, k), parts in counts.items():
                suffix = "" if m == "dump_all" else f" k={k}"
                click.echo(f"{run_id} {m}{suffix}: {', '.join(parts)}")


@command("rescore")
@click.option("--variant", required=True, help="name of the new scoring variant")
@click.option("--judge-model", default=None, help="model for the recovery judge")
@click.option("--judge-prompt", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="another prompt file for the recovery judge (same placeholders)")
@click.option("--reader-model", default=None, help="model for the slot-filling reader (slots are filled again)")
@click.option("--runs", default=None, help=RUNS_HELP)
@stage_options(RESCORE)
@panel_options
@global_options(uses=STORE + MODEL)
def rescore(variant, judge_model, judge_prompt, reader_model, runs, use_batch, batch_file, judges, repeats):
    """Frozen rescoring: re-judge the default predictions (or re-fill them) as a new variant."""
    run(_rescore, current_settings(), variant, judge_model, str(judge_prompt) if judge_prompt else None,
        reader_model, split_list(runs), split_list(judges), repeats, use_batch, batch_file)


async def _rescore(settings, variant, judge_model, judge_prompt, reader_model, runs, judges, repeats,
                   use_batch=False, batch_file=None):
    from memaudit.scoring.panel import Panel
    from memaudit.runtime import open_runtime
    from memaudit.scoring.recovery import ROLES_CALLED
    from memaudit.scoring.rescore import rescore_runs

    async with open_runtime(settings, create=False) as rt:
        panel = Panel.build(rt.llm, judges, repeats)
        chosen = await _chosen_runs(rt.store, runs) if runs is not None else await rt.store.scores.scored_runs()
        async with batched(rt, ROLES_CALLED, use_batch, batch_file):
            await rescore_runs(rt, chosen, variant, judge_model=judge_model, judge_prompt=judge_prompt,
                               reader_model=reader_model, panel=panel)
        await _print_scores(rt.store, chosen, variant)


@command("replay")
@click.option("--runs", default=None, help="comma-separated run ids (default: every recorded rollout run)")
@global_options(uses=STORE + ("concurrency", "seed", "prompts_dir") + MEMORY + WORKERS)  # the endpoint: the runs'
def replay(runs):
    """Re-execute the recorded runs from the call cache only and compare every artifact. The model
    settings are the ones the runs recorded: no model option is needed, no model is contacted."""
    from memaudit.replay import replay as replay_recorded

    result = run(replay_recorded, current_settings(), split_list(runs))
    click.echo(f"compared {result.summary()}", err=True)
    if result.difference is not None:
        click.echo(result.difference)
        sys.exit(1)  # click returns Exit codes from main() without exiting; a difference must fail the shell
    click.echo("identical")


COMMANDS = [score, attribute, rescore, replay]
