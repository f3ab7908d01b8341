"""Write docs/adapters.md's table of the deployed libraries from their adapters' declarations
(adapters/deployed.py `library_table`) and each library's configuration card (adapters/card.py
`card_markdown`), between their marker lines:

    .venv/bin/python scripts/library_table.py

Every built-in library must load here (its extra installed, its environment built: `make install`)."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memaudit.adapters.card import CARDS_END, CARDS_START, card_markdown  # noqa: E402
from memaudit.adapters.deployed import TABLE_END, TABLE_START, library_table, registered_libraries  # noqa: E402
from memaudit.adapters.registry import BUILTIN_ORIGIN, registrations  # noqa: E402

DOCS = REPO / "docs" / "adapters.md"


def builtin_libraries() -> dict:
    builtins = {r.name for r in registrations() if r.origin == BUILTIN_ORIGIN}
    return {name: adapter for name, adapter in registered_libraries().items() if name in builtins}


def with_table(text: str, table: str, start: str = TABLE_START, end: str = TABLE_END) -> str:
    before, rest = text.split(start, 1)
    _, after = rest.split(end, 1)
    return f"{before}{start}\n{table}\n{end}{after}"


def cards(libraries: dict) -> str:
    return "\n\n".join(card_markdown(name, adapter.configuration()) for name, adapter in sorted(libraries.items()))


def main() -> None:
    libraries = builtin_libraries()
    text = with_table(DOCS.read_text(), library_table(libraries))
    DOCS.write_text(with_table(text, cards(libraries), CARDS_START, CARDS_END))
    print(f"wrote the table of {len(builtin_libraries())} deployed libraries in {DOCS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
