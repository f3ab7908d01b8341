"""Commands: view — the static HTML audit report (it reads the store only, never a model)."""
from __future__ import annotations

from pathlib import Path

import click

from memaudit.cli.common import STORE, command, current_settings, global_options, out, run, split_list
from memaudit.report import userdata

RUNS_HELP = "comma-separated run ids (default: every run in the store)"


@command("view")
@click.option("--runs", default=None, help=RUNS_HELP)
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), required=True,
              help="directory to write the report into (index.html, run pages, one data file per user)")
@click.option("--serve", is_flag=True,
              help="write only the tables and run pages, then serve the report on 127.0.0.1, producing each "
                   "user's drill-down from the store when it is opened (until Ctrl-C)")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="with --serve: the loopback port (0: a free one)")
@click.option("--user-data", type=click.Choice(userdata.USER_DATA), default="auto", show_default=True,
              help="which users' drill-down data files the static report holds: auto = all when the report "
                   f"covers at most {userdata.AUTO_USER_RUNS} user-runs (users x runs), else none and each user view says "
                   "how to get it (--serve, or --user-data all)")
@click.option("--audit", type=click.IntRange(min=1), default=None, metavar="N",
              help="also write audit.html: N targets (sampled with --seed) for a person to grade")
@global_options(uses=STORE + ("seed",))
def view(runs, out_dir, serve, port, user_data, audit):
    """Write a static HTML report: tables whose cells drill down to users, targets and transcripts."""
    if serve and user_data != "auto":
        raise click.UsageError("--user-data is for a static report; --serve produces each user's data when it is opened")
    chosen = split_list(runs)
    report = run(_view, current_settings(), chosen, out_dir, serve, port, "served" if serve else user_data, audit)
    if serve:
        return
    out.print(f"report written: {report.index} (open it in a browser; it works from disk)", highlight=False)
    if not report.data_written:
        out.print(f"users' drill-down data not written ({report.user_runs} user-runs, more than {userdata.AUTO_USER_RUNS}"
                  " for --user-data auto): serve it with `memaudit view --serve`, or add --user-data all",
                  highlight=False)


async def _view(settings, runs, out_dir, serve, port, user_data, audit):
    from memaudit.report.view import build_report
    from memaudit.store import open_store, select_runs

    async with open_store(settings.db, create=False) as store:
        report = await build_report(store, out_dir, runs, user_data=user_data)
        if audit is not None:  # before serving: the page is a file beside the report
            from memaudit.report.audit import write_audit_page

            chosen = [r.run for r in await select_runs(store, runs)]
            page = await write_audit_page(store, out_dir, chosen, audit, settings.seed)
            out.print(f"audit page written: {page}", highlight=False)
        if serve:
            from memaudit.report.serve import serve_report

            await serve_report(report, port, started=lambda url: out.print(
                f"report served at {url} (loopback only; Ctrl-C stops it)", highlight=False))
        return report


COMMANDS: list = [view]
