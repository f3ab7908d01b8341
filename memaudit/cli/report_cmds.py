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
@global_options
def view(runs, out_dir):
    """Write a static HTML report: tables whose cells drill down to users, targets and transcripts."""
    chosen = split_list(runs)
    index = run(_view, current_settings(), chosen, out_dir)
    out.print(f"report written: {index} (open it in a browser; it works from disk)", highlight=False)


async def _view(settings, runs, out_dir):
    from memaudit.report.view import write_report
    from memaudit.store import open_store

    async with open_store(settings.db, create=False) as store:
        return await write_report(store, out_dir, runs)


COMMANDS: list = [view]
