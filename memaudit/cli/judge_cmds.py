"""Commands: judge-check (control answers for every judge) and human import (grades from the
audit page of `memaudit view --audit N`)."""
from __future__ import annotations

from pathlib import Path

import click

from memaudit.cli.batch_cmds import batched
from memaudit.cli.common import (
    MODEL, STORE, Group, command, current_settings, global_options, run, split_list, stage_options)
from memaudit.cli.score_cmds import panel_options
from memaudit.errors import BadInput
from memaudit.stages import JUDGE_CHECK


@command("judge-check")
@click.option("--runs", default=None, help="check on the benchmarks of these runs (comma-separated)")
@click.option("--bench", "benches", default=None,
              help="comma-separated benchmark names (default: the runs' benchmarks, else every benchmark)")
@click.option("--per-category", type=click.IntRange(min=1), default=10, show_default=True,
              help="bank entries sampled per category (with --seed)")
@click.option("--max-false-pass", type=click.FloatRange(0, 1), default=0.10, show_default=True,
              help="flag a judge `lenient` when its negative false-pass rate exceeds this")
@click.option("--min-pass", type=click.FloatRange(0, 1), default=0.90, show_default=True,
              help="flag a judge `harsh` when its positive pass rate is below this")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@panel_options
@stage_options(JUDGE_CHECK)
@global_options(uses=STORE + MODEL)
def judge_check(runs, benches, per_category, max_false_pass, min_pass, fmt, judges, repeats, use_batch, batch_file,
                shard):
    """Control answers with a known grade (truth, paraphrase; another user's value, a vague
    non-answer, the reversed value) sent to every judge: flags lenient and harsh judges."""
    from memaudit.tables.judge_checks import Thresholds

    text = run(_judge_check, current_settings(), split_list(runs), split_list(benches), per_category,
               Thresholds(max_false_pass, min_pass), fmt, split_list(judges), repeats, shard, use_batch, batch_file)
    click.echo(text, nl=False)


async def _judge_check(settings, runs, benches, per_category, thresholds, fmt, judges, repeats, shard=None,
                       use_batch=False, batch_file=None) -> str:
    import orjson

    from memaudit.tables.judge_checks import check_summary, no_checks
    from memaudit.scoring.judge_check import ROLES_CALLED, run_judge_check
    from memaudit.scoring.panel import Panel
    from memaudit.runtime import open_runtime

    async with open_runtime(settings, create=False, shard=shard) as rt:
        panel = Panel.build(rt.llm, judges, repeats)
        chosen = await _benches(rt.store, runs, benches)
        async with batched(rt, ROLES_CALLED, use_batch, batch_file):
            await run_judge_check(rt, chosen, panel, per_category=per_category, thresholds=thresholds)
        # None: no verdict stored yet (under --batch every one may still wait for a batch)
        summary = await check_summary(rt.store, chosen, thresholds) or no_checks(thresholds)
    if fmt == "json":
        return orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n"
    if not summary["judges"]:
        return f"judge-check: no control verdict stored for {', '.join(chosen)} yet\n"
    from memaudit.tables.judges_render import check_tables
    from memaudit.tables.paper_render import md_table

    return "\n\n".join(md_table(*table) for table in check_tables(summary)) + "\n"


async def _benches(store, runs, benches) -> list[str]:
    from memaudit.store import select_runs

    if benches is not None:
        return benches
    if runs is not None:
        return list(dict.fromkeys(r.bench for r in await select_runs(store, runs)))
    found = [b["name"] for b in await store.benchmarks.list()]
    if not found:
        raise BadInput("no benchmark in the store: import one with `memaudit bench import` (or pass --db)",
                       field="bench")
    return found


@click.group("human", cls=Group)
def human():
    """Human grades from the audit page of `memaudit view --audit N`."""


@human.command("import")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@global_options(uses=STORE)
def human_import(file):
    """Store a grader's exported grades and print their agreement with every judge and the panel."""
    for line in run(_human_import, current_settings(), file):
        click.echo(line)


async def _human_import(settings, file: Path) -> list[str]:
    from memaudit.report.human import import_grades
    from memaudit.tables.judges import judges_section
    from memaudit.tables.columns import human_text
    from memaudit.store import open_store, select_runs

    async with open_store(settings.db, create=False) as store:
        grader, n = await import_grades(store, file)
        section = await judges_section(store, await select_runs(store, None), resamples=0)
    lines = [f"imported {n} grade(s) by {grader}"]
    lines += [f"{j['model']} vs human: {human_text(j['human'])}" for j in section["per_judge"]]
    lines.append(f"panel vs human: {human_text(section['panel_human'])}")
    return lines


COMMANDS = [judge_check, human]
