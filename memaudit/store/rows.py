"""What every repository of the store shares: JSON columns, the statement shape and typed rows."""
from __future__ import annotations

from dataclasses import fields
from functools import cache
from typing import Any, Callable, ClassVar

import orjson

from memaudit.canonical import canonical_text

Statement = tuple[str, tuple]


def dumps(obj: Any) -> str:
    return canonical_text(obj)


def loads(text: str | bytes | None) -> Any:
    return None if text is None else orjson.loads(text)


def marks(values) -> str:
    """`?,?,?` for an IN (...) list of the values."""
    return ",".join("?" * len(values))


class Row:
    """A typed row of one table (a dataclass, fields = the table's columns in order, held against the
    schema by tests/store/test_rows.py): the one place a repository spells its INSERT. A domain
    record stored field for field is its table's row by inheritance (`class AttributionRow(Attribution,
    Row)`), its fields then spelled once; NOT_STORED names fields that are not columns. JSON columns
    hold Python values, encoded by ENCODE on write (booleans too: ENCODE int)."""
    TABLE: ClassVar[str]
    VERB: ClassVar[str] = "INSERT"
    ENCODE: ClassVar[dict[str, Callable[[Any], Any]]] = {}
    NOT_STORED: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def of(cls, record) -> "Row":
        """The row of a domain record whose fields it inherits."""
        return cls(**{f.name: getattr(record, f.name) for f in fields(cls)})

    def values(self) -> tuple:
        enc = self.ENCODE
        return tuple(enc[name](getattr(self, name)) if name in enc else getattr(self, name)
                     for name in _columns(type(self)))

    def statement(self, verb: str | None = None) -> Statement:
        """The INSERT of this row; `verb` replaces the table's own (`INSERT OR REPLACE` …) where a
        caller decides what a second row for the same key does."""
        return _sql(type(self), verb or self.VERB), self.values()

    def as_dict(self) -> dict:
        """Column -> value as stored."""
        return dict(zip(_columns(type(self)), self.values()))


@cache
def _columns(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.name not in cls.NOT_STORED)


@cache
def _sql(cls: type, verb: str) -> str:
    columns = _columns(cls)
    return f"{verb} INTO {cls.TABLE}({', '.join(columns)}) VALUES ({marks(columns)})"


def optional_int(value) -> int | None:
    """A boolean column that may be unknown (NULL)."""
    return None if value is None else int(value)
