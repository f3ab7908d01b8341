"""Ids that become file names, and the paths built from them.

User ids, run ids and tags name files and directories of the release layout (`history/<run>/<user>/…`),
so each is checked once where it enters memaudit (a benchmark read, `rollout --tag`, a release's run
directories) against one safe pattern: 1 to 128 characters of letters, digits, `_`, `-` and `.`,
starting with a letter or a digit. That rules out `/`, `..`, hidden names and names too long
for a file system, while every published id (`user_001`, `memt_memonly_pooled_50`) passes.

Every path memaudit reads from a release or writes into an export is also resolved (symlinks
followed) and checked to stay under its root (`inside`), so neither a crafted id nor a symlink in a
downloaded release reaches a file elsewhere.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from memaudit.errors import BadInput

MAX_ID_LENGTH = 128
SAFE_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{MAX_ID_LENGTH - 1}}}")
SAFE_ID_RULE = (f"1-{MAX_ID_LENGTH} characters of letters, digits, '_', '-' and '.', "
                "starting with a letter or a digit")


def is_safe_id(value) -> bool:
    return isinstance(value, str) and SAFE_ID.fullmatch(value) is not None


def id_problem(value, kind: str) -> str | None:
    """Why `value` cannot be a `kind` (user id, run id, tag), or None when it can."""
    if is_safe_id(value):
        return None
    shown = repr(value) if not isinstance(value, str) or len(value) <= 40 else f"{value[:40]!r}… ({len(value)} chars)"
    return f"{kind} {shown} is not a safe id ({SAFE_ID_RULE})"


def check_id(value, kind: str, *, file: str | None = None, user: str | None = None,
             field: str | None = None) -> str:
    """`value` if it is a safe id, else BadInput naming where it came from."""
    problem = id_problem(value, kind)
    if problem is not None:
        raise BadInput(problem, file=file, user=user, field=field)
    return value


def inside(root: Path, path: Path, *, label: str | None = None, user: str | None = None) -> Path:
    """`path` resolved (symlinks followed), provided it stays under `root` resolved; else BadInput
    naming the file. The check runs before anything is read or written there."""
    try:
        base = Path(root).resolve()
        resolved = Path(path).resolve()
    except (RuntimeError, OSError):  # Python raises RuntimeError for a symlink loop
        raise BadInput("a symlink loop (or a path that cannot be resolved); refused", file=label or str(path),
                       user=user) from None
    if not resolved.is_relative_to(base):
        raise BadInput(f"resolves outside {root} (a '..' or a symlink); refused", file=label or str(path), user=user)
    return resolved


def refuse_links_out(root: Path) -> None:
    """Before writing into `root`: any symlink already in it that leads outside it is refused, so a
    refused write leaves nothing half-written and nothing is ever written through such a link."""
    if not Path(root).is_dir():
        return
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(folder) / name
            if path.is_symlink():
                inside(root, path, label=str(path.relative_to(root)))
