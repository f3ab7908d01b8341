"""Commands: bench validate / import / list — benchmark instances. None of them contacts a model."""
from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from memaudit.cli.common import STORE, Group, current_settings, global_options, out, run


@click.group("bench", cls=Group)
def bench():
    """Benchmark instances: validate, import, list."""


@bench.command("validate")
@click.argument("ref")
@click.option("--pool", "pool_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="dimension pool to check the banks against (default: the release's own pool, if any)")
@click.option("--tasks-dir", default=None, help="task directory under benchmark_data/ when there are several")
@global_options(uses=STORE)
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
@global_options(uses=STORE)
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
@global_options(uses=STORE)
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


COMMANDS = [bench]
