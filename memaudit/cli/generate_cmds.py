"""Commands: generate — new benchmark users (persona -> bank -> tasks) in the release layout."""
from __future__ import annotations

from pathlib import Path

import click

from memaudit.cli.common import MODEL, STORE, command, console, current_settings, global_options, out, run
from memaudit.errors import MemauditError


@command("generate")
@click.option("--users", "n_users", type=int, required=True, help="how many users (user_001 … user_N)")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="output directory (release layout); rerunning resumes")
@click.option("--tasks-dir", default="tasks", show_default=True, help="name of the directory under benchmark_data/")
@click.option("--pool", "pool_path", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="dimension pool JSON (default: the bundled pool)")
@click.option("--order", type=click.Choice(["blocks", "interleaved"]), default="blocks", show_default=True,
              help="task order: category blocks in bank order (published) or categories in turn")
@click.option("--hints/--no-hints", default=True, show_default=True,
              help="give the task writer a per-category hint on how such facts surface (published: on)")
@click.option("--edits", type=int, default=1, show_default=True,
              help="editor rewrites per fishing task at most (published: 1)")
@click.option("--recheck/--no-recheck", default=False, show_default=True,
              help="review every rewrite again, needed for --edits above 1 (published: no)")
@click.option("--evolving", type=int, default=0, show_default=True,
              help="bank entries per user that change at a later task (written by the generator, passed by "
                   "a reviewer); 0: a static benchmark, as published")
@global_options(uses=STORE + MODEL)
def generate(n_users, out_dir, tasks_dir, pool_path, order, hints, edits, recheck, evolving):
    """Generate benchmark users with the anti-fishing critic/editor pass (--seed sets the base seed).

    memaudit's earlier way: --order interleaved --no-hints --edits 3 --recheck."""
    from memaudit.bench.generate import GenerationOptions

    options = GenerationOptions(order, hints=hints, edits=edits, recheck=recheck, evolving=evolving)
    report = run(_generate, current_settings(), n_users, out_dir, tasks_dir, pool_path, options)
    out.print(f"{out_dir}: {len(report.written)} users written ({len(report.generated)} new, "
              f"{len(report.resumed)} resumed); {report.edits} editor rewrite(s), "
              f"{report.still_fishing} task(s) still fishing after the budget", highlight=False)
    for problem in report.problems:
        console.print(f"validation: {problem}", highlight=False, markup=False)
    if report.failures:
        lines = "; ".join(f"{u}: {why}" for u, why in sorted(report.failures.items()))
        raise MemauditError(f"{len(report.failures)} user(s) failed, rerun to retry them: {lines}")
    if report.problems:
        raise MemauditError(f"the written benchmark has {len(report.problems)} validation problem(s)")


async def _generate(settings, n_users, out_dir, tasks_dir, pool_path, options):
    from memaudit.bench.generate import generate as generate_users
    from memaudit.llm.server import require_embedded
    from memaudit.runtime import open_runtime

    if not settings.db.exists():  # a new store caches no answer: the model is needed
        require_embedded(settings)
    async with open_runtime(settings) as rt:
        return await generate_users(rt, n_users, out_dir, tasks_dir=tasks_dir, pool_path=pool_path, options=options,
                                    progress=lambda user, msg: console.print(f"{user}: {msg}", highlight=False,
                                                                             markup=False))


COMMANDS = [generate]
