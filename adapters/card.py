"""A deployed library's configuration card: every setting memaudit passes to the library or
patches in it, beside the library's own default and why, so that a maintainer can check that the
library was run as its authors ship and document it (docs/adapters.md).

A row's `library_default` is what the installed library does when nothing is passed, `used` what
memaudit's run used, `why` the reason for any difference (an upstream issue where one exists). A
feature that is off because a piece cannot be installed offline is a row with `used` "off" (OFF),
named on the rollout's output.

Where the installed package states the default (a keyword's default, a config field's), the row
says where (`read`): the card's drift test (tests/adapters/test_cards.py) reads it there and fails
when an upgrade moved it, so the card never states a default the library no longer has."""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Callable

FIELDS = ("setting", "library_default", "used", "why")
OFF = "off"


@dataclass(frozen=True)
class CardRow:
    setting: str
    library_default: str
    used: str
    why: str
    # The default as the installed package gives it (its str() is `library_default`), or None
    # where no value of the package says it (a behaviour, a class chosen when none is passed).
    read: Callable[[], object] | None = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict:
        return {name: getattr(self, name) for name in FIELDS}


def keyword_default(fn, name: str) -> Callable[[], object]:
    """Where a function states a keyword's default: its signature, read when asked."""
    return lambda: inspect.signature(fn).parameters[name].default


def field_default(model, name: str) -> Callable[[], object]:
    """Where a pydantic model states a field's default."""
    return lambda: model.model_fields[name].default


# docs/adapters.md's configuration cards lie between these lines (scripts/library_table.py writes
# them; tests/adapters/test_cards.py checks them against the installed libraries' cards).
CARDS_START = "<!-- the configuration cards, from the adapters: scripts/library_table.py -->"
CARDS_END = "<!-- end of the generated cards -->"


def card_markdown(name: str, rows: list[CardRow]) -> str:
    """A library's section of docs/adapters.md: its card as a table. A feature on or off by whether
    its piece is installed here reads as such (the docs are the same on every machine)."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [f"### `{name}`", "", "| " + " | ".join(FIELDS) + " |", "|" + "---|" * len(FIELDS)]
    for row in rows:
        used = "on where installed, else off" if row.used in ("on", OFF) else row.used
        why = row.why if row.used not in ("on", OFF) else "needs a piece that cannot be fetched offline"
        lines.append("| " + " | ".join(cell(v) for v in (row.setting, row.library_default, used, why)) + " |")
    return "\n".join(lines)


def drifted(rows: list[CardRow]) -> list[str]:
    """The rows whose stated default the installed library no longer has, each in one line."""
    return [f"{row.setting}: the card says {row.library_default!r}, the installed library {row.read()!r}"
            for row in rows if row.read is not None and str(row.read()) != row.library_default]
