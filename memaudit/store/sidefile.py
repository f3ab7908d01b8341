"""Large all-or-nothing writes without twice the disk: write into a store beside the real one and
swap it in.

One SQLite transaction holding a whole import keeps every page it writes in the WAL until the
commit, so an import needs the store's size again in free disk (a 200-user import peaked at a
978 MiB WAL beside a 972 MiB store). Writing into a side file instead lets the writer commit as
often as it likes, so SQLite's checkpoints keep the WAL small, and the rename at the end is what
makes the whole write atomic: a killed or failed writer leaves the real store as it was (and a
side file that the next writer removes). An existing store is copied into the side file first,
so the free disk needed is about the final store's size, whether the store was empty or not."""
from __future__ import annotations

import os
import sqlite3
from contextlib import asynccontextmanager
from pathlib import Path

from memaudit.errors import BadInput, StoreError
from memaudit.store.faults import not_a_store

SIDE_SUFFIX = ".side"
SQLITE_EXTRAS = ("", "-wal", "-shm", "-journal")


def side_path(path: Path) -> Path:
    return path.with_name(path.name + SIDE_SUFFIX)


def _remove_side(side: Path) -> None:
    for extra in SQLITE_EXTRAS:
        Path(str(side) + extra).unlink(missing_ok=True)


def _fingerprint(path: Path) -> tuple:
    """What changes when anyone commits to the store (its file or its WAL)."""
    stats = []
    for extra in ("", "-wal"):
        try:
            st = os.stat(str(path) + extra)
            stats.append((st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            stats.append(None)
    return tuple(stats)


def _copy(path: Path, side: Path) -> tuple:
    """Copy the store into the side file (a consistent snapshot, WAL included); returns the
    store's fingerprint as copied. Closing the last connection folds the WAL into the store, so a
    WAL still there afterwards belongs to another process using the store."""
    source = sqlite3.connect(str(path))
    try:
        target = sqlite3.connect(str(side))
        try:
            source.backup(target)
        finally:
            target.close()
    finally:
        source.close()
    wal = Path(str(path) + "-wal")
    if wal.exists() and wal.stat().st_size:
        raise BadInput("another process has the store open; import when no other memaudit command uses it",
                       file=str(path))
    return _fingerprint(path)


def swap_in(side: Path, path: Path) -> None:
    """Rename a finished side file over `path` durably (import-release, merge)."""
    with open(side, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(side, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)  # the rename itself survives a crash
    finally:
        os.close(folder)


@asynccontextmanager
async def replacing(path: str | Path):
    """A Store on a side file that starts as a copy of the store at `path` (or empty) and replaces it
    when the block ends without an exception. Nothing else may write the store meanwhile: if it
    changed, nothing is swapped in and the error says so."""
    from memaudit.store import Store

    path = Path(path)
    side = side_path(path)
    _remove_side(side)  # left by a writer that was killed
    try:
        with not_a_store(path):
            before = _copy(path, side) if path.exists() else None
    except StoreError:
        _remove_side(side)
        raise
    try:
        store = await Store.open(side)
        try:
            yield store
        finally:
            await store.close()  # checkpoints and removes the side file's WAL
        if (_fingerprint(path) if path.exists() else None) != before:
            raise BadInput("another command wrote the store during the import; nothing was imported, "
                           "run it again when the store is idle", file=str(path))
        swap_in(side, path)
    finally:
        _remove_side(side)
