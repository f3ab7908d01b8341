"""Commands: import-release, export — the published release layout, read and written. Neither
contacts a model."""
from __future__ import annotations

from pathlib import Path

import click

from memaudit.cli.common import current_settings, global_options, out, run, split_list


@click.command("import-release")
@click.argument("path", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--name", default=None, help="benchmark name (default: the directory's name)")
@click.option("--tasks-dir", default=None, help="task directory under benchmark_data/ when there are several")
@global_options
def import_release(path, name, tasks_dir):
    """Import a published release: its benchmark and its runs (history, memory, recon_judge,
    attribution, oracle), as runs named after their directories."""
    runs = run(_import_release, current_settings(), path, name, tasks_dir)
    out.print(f"imported {len(runs)} run(s): {', '.join(runs)}", highlight=False)


async def _import_release(settings, path, name, tasks_dir):
    from memaudit.release import import_release as import_release_dir
    from memaudit.store import open_store

    async with open_store(settings.db) as store:
        return await import_release_dir(store, path, name=name, tasks_dir=tasks_dir)


@click.command("export")
@click.option("--runs", default=None, help="comma-separated run ids (default: all runs)")
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="directory to write the release layout into")
@global_options
def export(runs, out_dir):
    """Write runs and their benchmark in the published release layout."""
    names = split_list(runs)
    exported = run(_export, current_settings(), names, out_dir)
    out.print(f"exported {len(exported)} run(s) to {out_dir}", highlight=False)


async def _export(settings, runs, out_dir):
    from memaudit.release import export_runs
    from memaudit.store import open_store

    async with open_store(settings.db, create=False) as store:
        return await export_runs(store, runs, out_dir)


COMMANDS = [import_release, export]
