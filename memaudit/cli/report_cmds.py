"""Commands: view — the static HTML audit report (it reads the store only, never a model)."""
from __future__ import annotations

from pathlib import Path

import click

from memaudit.cli.common import current_settings, global_options, out, run, split_list

RUNS_HELP = "comma-separated run ids (default: every run in the store)"


@click.command("view")
@click.option("--runs", default=None, help=RUNS_HELP)
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="directory to write the report into (index.html and one page per user and target)")
@click.option("--audit", type=click.IntRange(min=1), default=None, metavar="N",
              help="also write audit.html: N targets (sampled with --seed) for a person to grade")
@global_options
def view(runs, out_dir, audit):
    """Write a static HTML report: tables whose cells drill down to users, targets and transcripts."""
    chosen = split_list(runs)
    index, audit_page = run(_view, current_settings(), chosen, out_dir, audit)
    out.print(f"report written: {index} (open it in a browser; it works from disk)", highlight=False)
    if audit_page is not None:
        out.print(f"audit page written: {audit_page}", highlight=False)


async def _view(settings, runs, out_dir, audit):
    from memaudit.report.view import write_report
    from memaudit.store import open_store, select_runs

    async with open_store(settings.db, create=False) as store:
        index = await write_report(store, out_dir, runs)
        if audit is None:
            return index, None
        from memaudit.report.audit import write_audit_page

        chosen = [r.run for r in await select_runs(store, runs)]
        return index, await write_audit_page(store, out_dir, chosen, audit, settings.seed, settings.prompts_dir)


COMMANDS: list = [view]
