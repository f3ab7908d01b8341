"""Commands: tables — the paper's tables from the store (no model is contacted)."""
from __future__ import annotations

from pathlib import Path

import click

from memaudit.cli.common import STORE, command, current_settings, global_options, run, split_list
from memaudit.errors import BadInput
from memaudit.store import open_store, select_runs
from memaudit.tables import stats
from memaudit.tables.paper import compute_tables
from memaudit.tables.paper_render import SECTIONS, csv_sections, render, render_csv_section
from memaudit.tables.robustness import compare_variants

FORMATS = ("md", "latex", "csv", "json")
EXTENSIONS = {"md": "md", "latex": "tex", "json": "json"}


async def _tables(db: Path, runs, fmt: str, out_dir: Path | None, only: str | None, compare: str | None,
                  bootstrap: int, seed: int) -> None:
    async with open_store(db, create=False) as store:
        if not await select_runs(store, runs):
            raise BadInput("the store holds no runs; run a rollout or import-release first", file=str(db))
        tables = await compute_tables(store, runs, bootstrap=bootstrap, seed=seed)
        if compare:
            tables["robustness"] = await compare_variants(store, [r.run for r in await select_runs(store, runs)], compare)
    if only:
        tables = {name: rows for name, rows in tables.items() if name in (only, "robustness")}
    if out_dir is not None:
        _write_all(tables, out_dir)
    text = render(tables, fmt)
    click.echo(text, nl=False)


def _write_all(tables: dict, out_dir: Path) -> None:
    """Every format, one CSV per table, and the plots; never through a symlink leading out."""
    from memaudit.ids import inside, refuse_links_out

    refuse_links_out(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for fmt, ext in EXTENSIONS.items():
        inside(out_dir, out_dir / f"tables.{ext}").write_text(render(tables, fmt))
    for name, rows in csv_sections(tables):
        inside(out_dir, out_dir / f"{name}.csv").write_text(render_csv_section(rows))
    if "table3" in tables and "gap" in tables:
        from memaudit.report.plots import write_plots  # matplotlib takes seconds to import: only when plotting
        write_plots(tables, out_dir)


@command("tables")
@click.option("--runs", default=None, help="comma-separated run ids (default: every run in the store)")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="md", show_default=True)
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="also write every format, one CSV per table and the plots (PNG, SVG) here")
@click.option("--only", type=click.Choice(SECTIONS), default=None, help="print one table")
@click.option("--compare", default=None, metavar="VARIANT",
              help="add the frozen-rescoring robustness comparison of VARIANT against the default scores")
@click.option("--bootstrap", type=click.IntRange(min=0), default=stats.RESAMPLES, show_default=True,
              help="bootstrap / permutation resamples for intervals and paired tests (0 = none)")
@global_options(uses=STORE + ("seed",))
def tables(runs, fmt, out_dir, only, compare, bootstrap):
    """The paper's tables (2, 3, 4, footprint, memory health, gap, tokens) with intervals and paired comparisons."""
    settings = current_settings()
    run_ids = split_list(runs)
    run(_tables, settings.db, run_ids, fmt, out_dir, only, compare, bootstrap, settings.seed)


COMMANDS = [tables]
