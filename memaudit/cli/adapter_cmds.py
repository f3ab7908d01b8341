"""Commands: systems, check-adapter — the memory systems memaudit can audit, and the adapter
contract run against one of them."""
from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from memaudit.cli.common import command, run


@command("systems")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True,
              help='[{"name", "origin", "version", "loads", "error", "extra", "configuration"}]; a deployed '
                   'library\'s "configuration" is its card: [{"setting", "library_default", "used", "why"}]')
def systems(name, as_json):
    """Every memory system: its name, where it comes from (built-in or package==version), the
    deployed library it runs and its version, and whether it loads (with the error when it does not;
    for a library that is not installed, the extra that brings it). With NAME: that system's
    configuration card, each setting memaudit passes to or patches in its deployed library beside the
    library's default."""
    from memaudit.adapters.registry import get_adapter, load, missing_extra, registrations
    from memaudit.errors import MemauditError

    if name is not None:
        print_card(name, configuration_of(get_adapter(name)), as_json)
        return
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
        row = {"name": r.name, "origin": r.origin, "version": version, "loads": error is None, "error": error,
               "extra": extra}
        card = configuration_of(cls) if cls is not None else None
        rows.append(row if card is None else {**row, "configuration": card})
    if as_json:
        click.echo(orjson.dumps(rows).decode())
        return
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        # a library not installed yet: its own one line, which names the extra (or environment) to install
        state = "ok" if r["loads"] else f"{'not installed' if r['extra'] else 'BROKEN'}: {r['error']}"
        click.echo(f"{r['name']:<{width}}  {r['origin']:<10}  {r['version'] or '':<26}  {state}")


def configuration_of(adapter) -> list[dict] | None:
    """A deployed library's configuration card as JSON rows (adapters/card.py), None for a system
    of memaudit's own design (it has no library default to differ from)."""
    card = getattr(adapter, "configuration", None)
    return None if card is None else [row.to_json() for row in card()]


def print_card(name: str, card: list[dict] | None, as_json: bool) -> None:
    if as_json:
        click.echo(orjson.dumps({"name": name, "configuration": card}).decode())
        return
    if card is None:
        click.echo(f"{name}: memaudit's own design; no library, no configuration card")
        return
    from rich.table import Table

    from memaudit.adapters.card import FIELDS
    from memaudit.cli.common import out

    table = Table(*FIELDS, title=f"{name}: configuration card", show_lines=True)
    for row in card:
        table.add_row(*(row[field] for field in FIELDS))
    out.print(table)


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
