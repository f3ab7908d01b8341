"""Commands: demo — what `make run` runs: the sample benchmark end to end on the embedded model."""
from __future__ import annotations

import time
from pathlib import Path

import click
from rich.table import Table

from memaudit.cli.common import (MEMORY, MODEL, STORE, WORKERS, command, console, current_settings, global_options,
                                  out, run)
from memaudit.errors import redact_url
from memaudit.roles import AGENT


@command("demo")
@click.option("--users", type=int, default=None, help="sample users to run (default: the demo size)")
@click.option("--tasks", type=int, default=None, help="tasks per user (default: the demo size)")
@click.option("--max-turns", type=int, default=None, help="assistant replies per episode (default: the demo size)")
@click.option("--report", "report_dir", type=click.Path(path_type=Path, file_okay=False),
              default=Path("memaudit-report"), show_default=True, help="where the HTML report is written")
@global_options(uses=STORE + MODEL + MEMORY + WORKERS)
def demo(users, tasks, max_turns, report_dir):
    """The bundled sample benchmark end to end: rollout, scoring in both modes, attribution, tables, report."""
    run(_demo, current_settings(), users, tasks, max_turns, report_dir)


async def _demo(settings, users, tasks, max_turns, report_dir):
    from dataclasses import replace

    from memaudit.cli.progress import RolloutProgress
    from memaudit.demo import DemoSize, run_demo
    from memaudit.runtime import open_runtime

    size = DemoSize()
    size = replace(size, users=users or size.users, tasks=tasks or size.tasks, max_turns=max_turns or size.max_turns)
    endpoint = (redact_url(settings.base_url) if settings.base_url
                else "the embedded SmolLM2-135M-Instruct model (llama.cpp, loopback)")
    console.print(f"memaudit demo on {endpoint}; store {settings.db}", highlight=False)
    start = time.monotonic()
    async with open_runtime(settings) as rt:
        result = await run_demo(rt, size, report_dir, progress=RolloutProgress("live"))
    print_tables(result["tables"])
    bench = result["bench"]
    n_tasks = len(next(iter(bench.tasks.values())))
    out.print(f"\nDone in {time.monotonic() - start:.0f} s. This demo is PARTIAL: "
              f"{size.cuts(len(bench.users), n_tasks, embedded=settings.on_embedded(AGENT))}. A 135M model makes a weak assistant, simulator and "
              "judge: the numbers show the pipeline works, not how good any memory system is.", highlight=False)
    out.print(f"HTML report: {report_dir / 'index.html'}   Reproduce from the cache: memaudit --db {settings.db} replay",
              highlight=False)
    out.print("Full benchmark on your own endpoint: memaudit --base-url URL --model NAME rollout --bench sample "
              "--systems nomem,longctx_full,mem0,amem && memaudit score --mode both && memaudit attribute --mode both "
              "&& memaudit tables   (see docs/models.md: pointing memaudit at an API or a vLLM server)", highlight=False)


# Table 2's columns the compact terminal view shows (by their first key); `memaudit tables` has all of them.
COMPACT_TABLE2 = ("run", "A", "D", "C", "B_dump_all", "B_retrieve", "items", "chars", "overflow_dump_all",
                  "failed_dump_all")


def _compact(name: str, rows: list[dict], keys: tuple[str, ...] | None = None) -> Table:
    """A declared table as the terminal shows it: its title, its short headers, means without their
    spread and intervals (memaudit/tables/columns.py and paper.py declare both)."""
    from memaudit.tables.columns import cell_text, header, num, shown, value
    from memaudit.tables.paper import DECLARED
    from memaudit.tables.paper_render import title

    columns = [c for c in shown(DECLARED[name], "md") if keys is None or c.keys[0] in keys]
    table = Table(title=title(name), title_justify="left", header_style="bold")
    table.add_column(header(columns[0], short=True), no_wrap=True)
    for column in columns[1:]:
        table.add_column(header(column, short=True), justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(num(value(row, c.keys[0]), c.digits) if c.kind == "summary" else cell_text(c, row)
                        for c in columns))
    return table


def print_tables(tables: dict) -> None:
    """Compact terminal versions of Tables 2, 3 and 4 (`memaudit tables` has every column, interval and
    what each column means)."""
    out.print(_compact("table2", tables["table2"], COMPACT_TABLE2))
    out.print(_compact("table3", tables["table3"]))
    out.print(_compact("table4", tables["table4"]))


COMMANDS = [demo]
