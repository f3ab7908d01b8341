"""Commands: demo — what `make run` runs: the sample benchmark end to end on the embedded model."""
from __future__ import annotations

import time
from pathlib import Path

import click
from rich.markdown import Markdown

from memaudit.cli.common import console, current_settings, global_options, out, run


@click.command("demo")
@click.option("--users", type=int, default=None, help="sample users to run (default: the demo size)")
@click.option("--tasks", type=int, default=None, help="tasks per user (default: the demo size)")
@click.option("--max-turns", type=int, default=None, help="assistant replies per episode (default: the demo size)")
@click.option("--report", "report_dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("memaudit-report"), show_default=True, help="where the HTML report is written")
@global_options
def demo(users, tasks, max_turns, report_dir):
    """The bundled sample benchmark end to end: rollout, scoring in both modes, attribution, tables, report."""
    run(_demo, current_settings(), users, tasks, max_turns, report_dir)


async def _demo(settings, users, tasks, max_turns, report_dir):
    from dataclasses import replace

    from memaudit.demo import DemoSize, run_demo
    from memaudit.runtime import open_runtime
    from memaudit.scoring.tables import render

    size = DemoSize()
    size = replace(size, users=users or size.users, tasks=tasks or size.tasks, max_turns=max_turns or size.max_turns)
    endpoint = settings.base_url or "the embedded SmolLM2-135M-Instruct model (llama.cpp, loopback)"
    console.print(f"memaudit demo on {endpoint}; store {settings.db}", highlight=False)
    start = time.monotonic()
    async with open_runtime(settings) as rt:
        result = await run_demo(rt, size, report_dir)
    tables = result["tables"]
    out.print(Markdown(render({k: tables[k] for k in ("table2", "table3", "table4")}, "md")))
    bench = result["bench"]
    n_tasks = len(next(iter(bench.tasks.values())))
    out.print(f"\nDone in {time.monotonic() - start:.0f} s. This demo is PARTIAL: "
              f"{size.cuts(len(bench.users), n_tasks)}. A 135M model makes a weak assistant, simulator and "
              "judge: the numbers show the pipeline works, not how good any memory system is.", highlight=False)
    out.print(f"HTML report: {report_dir / 'index.html'}   Reproduce from the cache: memaudit --db {settings.db} replay",
              highlight=False)
    out.print("Full benchmark on your own endpoint: memaudit --base-url URL --model NAME rollout --bench sample "
              "--systems nomem,longctx_full,mem0,amem && memaudit score --mode both && memaudit attribute --mode both "
              "&& memaudit tables   (see README: pointing memaudit at an API or a vLLM server)", highlight=False)


COMMANDS = [demo]
