"""Write docs/adapters.md's table of the deployed libraries from their adapters' declarations
(adapters/deployed.py `library_table`), between its marker lines:

    .venv/bin/python scripts/library_table.py

Every built-in library must load here (its extra installed, its environment built: `make install`)."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memaudit.adapters.deployed import TABLE_END, TABLE_START, library_table, registered_libraries  # noqa: E402
from memaudit.adapters.registry import BUILTIN_ORIGIN, registrations  # noqa: E402

DOCS = REPO / "docs" / "adapters.md"


def builtin_libraries() -> dict:
    builtins = {r.name for r in registrations() if r.origin == BUILTIN_ORIGIN}
    return {name: adapter for name, adapter in registered_libraries().items() if name in builtins}


def with_table(text: str, table: str) -> str:
    before, rest = text.split(TABLE_START, 1)
    _, after = rest.split(TABLE_END, 1)
    return f"{before}{TABLE_START}\n{table}\n{TABLE_END}{after}"


def main() -> None:
    DOCS.write_text(with_table(DOCS.read_text(), library_table(builtin_libraries())))
    print(f"wrote the table of {len(builtin_libraries())} deployed libraries in {DOCS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
