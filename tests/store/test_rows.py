"""Every table of the schema is written through one typed Row whose fields are the table's columns
in order, and docs/store.md names every table: the schema (db/*.sql) is the truth both are held to."""
from __future__ import annotations

import importlib
import pkgutil
import re
import sqlite3
from dataclasses import fields
from pathlib import Path

import memaudit.store
from memaudit.store import SCHEMA_DIR, Row

REPO = Path(__file__).resolve().parents[2]
POSITIONAL_INSERT = re.compile(r"INSERT\b[^\"']*?\bINTO\s+\w+\s+VALUES", re.I)


def schema() -> dict[str, list[str]]:
    """Table -> its columns in order, from every migration applied to an empty database."""
    conn = sqlite3.connect(":memory:")
    for path in sorted(SCHEMA_DIR.glob("[0-9][0-9][0-9]_*.sql")):
        conn.executescript(path.read_text())
    tables = [name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                               "AND name NOT LIKE 'sqlite_%'")]
    return {t: [c[1] for c in conn.execute(f"PRAGMA table_info('{t}')")] for t in tables}


def rows() -> list[type[Row]]:
    for module in pkgutil.iter_modules(memaudit.store.__path__):
        importlib.import_module(f"memaudit.store.{module.name}")
    found, todo = [], list(Row.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return found


def test_every_row_spells_its_tables_columns_in_order():
    tables = schema()
    for cls in rows():
        assert cls.TABLE in tables, f"{cls.__name__} writes {cls.TABLE}, which no migration creates"
        assert [f.name for f in fields(cls) if f.name not in cls.NOT_STORED] == tables[cls.TABLE], cls.__name__


def test_every_table_has_its_row():
    written = {cls.TABLE for cls in rows()}
    assert sorted(set(schema()) - written) == []


def test_no_repository_spells_a_positional_insert():
    for path in sorted(Path(memaudit.store.__file__).parent.glob("*.py")):
        assert not POSITIONAL_INSERT.search(path.read_text()), path.name


def test_the_store_docs_name_every_table():
    docs = (REPO / "docs" / "store.md").read_text()
    assert sorted(t for t in schema() if f"`{t}`" not in docs) == []
