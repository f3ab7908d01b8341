"""What every repository of the store shares: JSON columns and the statement shape."""
from __future__ import annotations

from typing import Any

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
