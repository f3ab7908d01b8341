"""JSON files of the release layout: strict reading (a damaged file is named) and
deterministic writing (sorted keys, fixed indentation: identical data gives identical bytes)."""
from __future__ import annotations

from pathlib import Path

import orjson

from memaudit.canonical import canonical_pretty
from memaudit.errors import BadInput


def read_json(path: Path, label: str, user: str | None = None):
    """Parse one JSON file; a missing, truncated or malformed file is a BadInput whose message
    starts with `label` (and the user, when known), like every problem line of a validation."""
    where = f"{label}: user {user}" if user else label
    try:
        # Only a regular file is read: a FIFO would block the read forever, a device never end.
        if path.exists() and not path.is_file():
            raise BadInput(f"{where}: not a regular file (a folder, FIFO, socket or device); refused")
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise BadInput(f"{where}: file not found") from None
    except OSError as exc:  # a symlink loop, a permission
        raise BadInput(f"{where}: cannot be read ({exc.strerror or exc})") from None
    except orjson.JSONDecodeError as exc:
        raise BadInput(f"{where}: malformed JSON ({exc})") from None


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canonical_pretty(data) + b"\n")
