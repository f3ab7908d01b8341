"""Commands: systems, check-adapter — the memory systems memaudit can audit, and the adapter
contract run against one of them."""
from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from memaudit.cli.common import command, run


@command("systems")
@click.option("--json", "as_json", is_flag=True, help='[{"name", "origin", "loads", "error"}]')
def systems(as_json):
    """Every memory system: its name, where it comes from (built-in or package==version), the
    deployed library it runs and its version, and whether it loads (with the error when it does not;
    for a library that is not installed, the extra that brings it)."""
    from memaudit.adapters.registry import install_hint, load, missing_extra, registrations
    from memaudit.errors import MemauditError

    rows = []
    for r in registrations():
        error, version, cls = r.problem, None, None
        if error is None:
            try:
                cls = load(r)
                version = cls.library_release()
            except MemauditError as exc:
                error = str(exc).removeprefix("field systems: ")
        extra = missing_extra(r.name) if cls is None else None
        rows.append({"name": r.name, "origin": r.origin, "version": version, "loads": error is None, "error": error,
                     "extra": extra})
    if as_json:
        click.echo(orjson.dumps(rows).decode())
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        state = "ok" if r["loads"] else f"not installed: {install_hint(r['extra'])}" if r["extra"] else \
            f"BROKEN: {r['error']}"
        click.echo(f"{r['name']:<{width}}  {r['origin']:<10}  {r['version'] or '':<26}  {state}")


@command("check-adapter")
@click.argument("name")
def check_adapter(name):
    """Run the adapter contract checks against a memory system, on the scripted fake model: writes
    and reads with the right types, snapshot/restore round trip, determinism. It takes no store: an
    adapter's traceback goes to memaudit-adapter.log in the current directory."""
    from memaudit.adapters.registry import get_adapter
    from memaudit.testing.adapter_contract import check_adapter as run_checks

    get_adapter(name)  # unknown or broken: its one line, before anything runs
    results = run(run_checks, name, Path.cwd())
    for check in results:
        click.echo(f"{check.name}: " + ("ok" if check.problem is None else f"FAILED: {check.problem}"))
    failed = sum(check.problem is not None for check in results)
    if failed:
        click.echo(f"memaudit: {name} fails {failed} of {len(results)} contract checks", err=True)
        sys.exit(1)
    click.echo(f"{name}: the adapter contract holds ({len(results)} checks)")


COMMANDS = [systems, check_adapter]
