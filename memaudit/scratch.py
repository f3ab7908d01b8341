"""Folders a command fills before it is done (replay's scratch store, an export being written):
named after the process that owns them, so a later command can tell a killed command's leftovers
(owner gone) from a running one's, and remove them."""
from __future__ import annotations

import os
import shutil
from pathlib import Path


def owned_prefix(prefix: str) -> str:
    """The name prefix of a folder this process owns."""
    return f"{prefix}{os.getpid()}-"


def remove_stale(parent: Path, prefix: str) -> None:
    """Remove the folders (or files: an archive being written) under `parent` named `<prefix><pid>-…`
    whose process is gone."""
    if not parent.is_dir():
        return
    for folder in parent.glob(f"{prefix}*"):
        owner = folder.name[len(prefix):].split("-", 1)[0]
        if not owner.isdigit() or _alive(int(owner)) or folder.is_symlink():
            continue
        if folder.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
        elif folder.is_file():
            folder.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True
