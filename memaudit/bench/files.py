"""JSON files of the release layout: strict reading (a damaged file is named) and
deterministic writing (sorted keys, fixed indentation: identical data gives identical bytes)."""
from __future__ import annotations

from pathlib import Path

import orjson

from memaudit.errors import BadInput


def read_json(path: Path, label: str):
    """Parse one JSON file; a missing, truncated or malformed file is a BadInput naming `label`."""
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise BadInput("file not found", file=label) from None
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"malformed JSON ({exc})", file=label) from None


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n")
