"""Commands: bench validate / import / list, import-release, export — benchmark instances and the
published release layout. None of them contacts a model."""
from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from memaudit.errors import BadInput

from memaudit.cli.common import current_settings, global_options, out, run, split_list

IMPORT_COMMIT_BYTES = 4 << 20  # per commit into the side file: the WAL stays near SQLite's 4 MB checkpoint size


@click.group("bench")
def bench():
    """Benchmark instances: validate, import, list."""


@bench.command("validate")
@click.argument("ref")
@click.option("--pool", "pool_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="dimension pool to check the banks against (default: the release's own pool, if any)")
@click.option("--tasks-dir", default=None, help="task directory under benchmark_data/ when there are several")
@global_options
def validate(ref, pool_path, tasks_dir):
    """Check a benchmark (`sample`, a release-layout directory, or an imported name): every problem,
    one per line, naming the file, the user and the field. User ids name files, so each must be a
    safe id (1-128 letters, digits, '_', '-', '.', starting with a letter or a digit), and every
    file of a release must lie under its root (no '..' or symlink out of it)."""
    problems = run(_validate, current_settings(), ref, pool_path, tasks_dir)
    for line in problems:
        click.echo(line)
    if problems:
        click.echo(f"memaudit: {len(problems)} problem(s) in {ref}", err=True)
        sys.exit(1)
    out.print(f"{ref}: ok", highlight=False)


async def _validate(settings, ref, pool_path, tasks_dir):
    from memaudit.bench.instances import SAMPLE_NAME, validate_bench
    from memaudit.store import open_store

    if ref == SAMPLE_NAME or Path(ref).is_dir():  # read from files: no store is opened, none is made
        return await validate_bench(None, ref, pool_path=pool_path, tasks_dir=tasks_dir)
    async with open_store(settings.db, create=False) as store:
        return await validate_bench(store, ref, pool_path=pool_path, tasks_dir=tasks_dir)


@bench.command("import")
@click.argument("path", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--name", required=True, help="name of the benchmark in the store")
@click.option("--tasks-dir", default=None, help="task directory under benchmark_data/ when there are several")
@global_options
def import_bench(path, name, tasks_dir):
    """Import benchmark instances (release layout or our export), all-or-nothing."""
    users, tasks = run(_import_bench, current_settings(), path, name, tasks_dir)
    out.print(f"imported benchmark {name}: {users} users, {tasks} tasks", highlight=False)


async def _import_bench(settings, path, name, tasks_dir):
    from memaudit.bench.instances import load_release_benchmark
    from memaudit.store import open_store

    bench = load_release_benchmark(path, name, tasks_dir=tasks_dir)
    async with open_store(settings.db) as store:
        await store.benchmarks.save(bench)
    return len(bench.users), sum(len(t) for t in bench.tasks.values())


@bench.command("list")
@click.option("--json", "as_json", is_flag=True, help='[{"name", "users", "tasks"}]')
@global_options
def list_benchmarks(as_json):
    """Benchmarks in the store."""
    rows = run(_list, current_settings())
    if as_json:
        click.echo(orjson.dumps(rows).decode())
        return
    for row in rows:
        out.print(f"{row['name']}: {row['users']} users, {row['tasks']} tasks", highlight=False)


async def _list(settings):
    from memaudit.store import open_store

    async with open_store(settings.db, create=False) as store:
        return await store.benchmarks.list()


@click.command("import-release")
@click.argument("path", type=click.Path(path_type=Path, exists=True))
@click.option("--name", default=None, help="benchmark name (default: the directory's or archive's name)")
@click.option("--tasks-dir", default=None, help="task directory under benchmark_data/ when there are several")
@global_options
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


@click.command("export")
@click.option("--runs", default=None, help="comma-separated run ids (default: all runs)")
@click.option("--out", "out_dir", default=None, type=click.Path(path_type=Path, file_okay=False),
              help="directory to write the release layout into")
@click.option("--archive", default=None, type=click.Path(path_type=Path, dir_okay=False),
              help="write the release layout into this one compressed archive instead (.tar.gz); "
                   "import-release reads it")
@global_options
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


COMMANDS = [bench, import_release, export]
