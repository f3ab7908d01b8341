"""Commands: import-release, export — the published release layout, read and written (a folder or
one archive). Neither contacts a model."""
from __future__ import annotations

from pathlib import Path

import click

from memaudit.cli.common import STORE, command, current_settings, global_options, out, run, split_list
from memaudit.errors import BadInput

IMPORT_COMMIT_BYTES = 4 << 20  # per commit into the side file: the WAL stays near SQLite's 4 MB checkpoint size


@command("import-release")
@click.argument("path", type=click.Path(path_type=Path, exists=True))
@click.option("--name", default=None, help="benchmark name (default: the directory's or archive's name)")
@click.option("--tasks-dir", default=None, help="task directory under benchmark_data/ when there are several")
@global_options(uses=STORE)
def import_release(path, name, tasks_dir):
    """Import a published release: its benchmark and its runs (history, memory, recon_judge,
    attribution, oracle), as runs named after their directories. PATH is the release directory or
    an archive written by `export --archive` (.tar.gz)."""
    runs = run(_import_release, current_settings(), path, name, tasks_dir)
    out.print(f"imported {len(runs)} run(s): {', '.join(runs)}", highlight=False)


async def _import_release(settings, path, name, tasks_dir):
    from memaudit.release.sinks import is_archive, unpacked

    if path.is_file():
        if not is_archive(path):
            raise BadInput("expected a release directory or a .tar.gz archive of one", file=str(path))
        with unpacked(path) as root:
            return await _import_release_dir(settings, root, name, tasks_dir)
    return await _import_release_dir(settings, path, name, tasks_dir)


async def _import_release_dir(settings, root, name, tasks_dir):
    from memaudit.release import import_release as import_release_dir
    from memaudit.store.sidefile import replacing

    # Into a copy beside the store, swapped in at the end: all-or-nothing without a WAL as large
    # as the import (memaudit/store/sidefile.py).
    async with replacing(settings.db) as store:
        return await import_release_dir(store, root, name=name, tasks_dir=tasks_dir, commit_every=IMPORT_COMMIT_BYTES)


@command("export")
@click.option("--runs", default=None, help="comma-separated run ids (default: all runs)")
@click.option("--out", "out_dir", default=None, type=click.Path(path_type=Path, file_okay=False),
              help="directory to write the release layout into")
@click.option("--archive", default=None, type=click.Path(path_type=Path, dir_okay=False),
              help="write the release layout into this one compressed archive instead (.tar.gz); "
                   "import-release reads it")
@global_options(uses=STORE)
def export(runs, out_dir, archive):
    """Write runs and their benchmark in the published release layout."""
    from memaudit.release.sinks import is_archive

    if (out_dir is None) == (archive is None):
        raise click.UsageError("give exactly one of --out DIR and --archive FILE")
    if archive is not None and not is_archive(archive):
        raise click.UsageError("--archive FILE must end in .tar.gz or .tgz")
    names = split_list(runs)
    exported = run(_export, current_settings(), names, out_dir or archive, archive is not None)
    out.print(f"exported {len(exported)} run(s) to {out_dir or archive}", highlight=False)


async def _export(settings, runs, target, archive):
    from memaudit.release import export_runs
    from memaudit.store import open_store

    async with open_store(settings.db, create=False) as store:
        return await export_runs(store, runs, target, archive=archive)


COMMANDS = [import_release, export]
