"""Commands: demo — what `make run` runs: the sample benchmark end to end on the embedded model."""
from __future__ import annotations

import time
from pathlib import Path

import click
from rich.table import Table

from memaudit.cli.common import console, current_settings, global_options, out, run
from memaudit.errors import redact_url
from memaudit.roles import AGENT


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
              "&& memaudit tables   (see README: pointing memaudit at an API or a vLLM server)", highlight=False)


CATEGORY_SHORT = {"skill_memory": "skill", "knowledge_memory": "knowledge", "episodic_memory": "episodic",
                  "self_model": "self-model", "assistance_preference": "preference"}
ATTRIBUTION_SHORT = {"ok": "ok", "memory_failure": "memory", "task_design_failure": "task",
                     "agent_elicitation_failure": "agent", "simulator_too_strict": "user",
                     "no_targeted_task": "no task", "unclassified": "unclass.", "overflow": "overflow"}


def _n(value, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _table(title: str, header: list[str]) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    table.add_column(header[0], no_wrap=True)
    for name in header[1:]:
        table.add_column(name, justify="right", no_wrap=True)
    return table


def print_tables(tables: dict) -> None:
    """Compact terminal versions of Tables 2, 3 and 4 (`memaudit tables` has every column and interval)."""
    t2 = _table("Table 2: outcome, preference, recovery, footprint (means over users)",
                ["run", "A %", "D /5", "C", "B dump", "B top-k", "items", "chars", "overflow", "failed"])
    for r in tables["table2"]:
        t2.add_row(r["run"] + (" (partial)" if r.get("partial") else ""), _n(r["A"], 1), _n(r["D"]), _n(r["C"]),
                   _n(r["B_dump_all"], 3), _n(r["B_retrieve"], 3), _n(r["items"], 1), _n(r["chars"], 0),
                   f"{r['overflow_dump_all'] or 0}/{r['overflow_retrieve'] or 0}",
                   f"{r.get('failed_dump_all') or 0}/{r.get('failed_retrieve') or 0}")
    t3 = _table("Table 3: recovery per category", ["run", "mode", *CATEGORY_SHORT.values(), "overall"])
    for r in tables["table3"]:
        t3.add_row(r["run"], r["mode"], *(_n(r[c]) for c in CATEGORY_SHORT), _n(r["overall"], 3))
    t4 = _table("Table 4: failure attribution", ["run", "mode", *ATTRIBUTION_SHORT.values(), "rate"])
    for r in tables["table4"]:
        t4.add_row(r["run"], r["mode"], *("–" if r[k] is None else str(r[k]) for k in ATTRIBUTION_SHORT),
                   _n(r["recovery_rate"]))
    for table in (t2, t3, t4):
        out.print(table)


COMMANDS = [demo]
