"""What SQLite reports, as the store's one error: faults of the store file or its place (read-only
file, full disk, lock held too long, damaged file, not a store) become a StoreError naming the file;
anything else is a bug and keeps its traceback."""
from __future__ import annotations

import sqlite3
from contextlib import contextmanager

from memaudit.errors import StoreError

STORE_FAULTS = {
    "readonly database": "the store is read-only; make the file and its directory writable, or copy it and "
                         "give --db the copy",
    "unable to open database": "the store cannot be opened for writing; check the directory's permissions",
    "disk is full": "the disk holding the store is full",
    "disk I/O error": "the disk holding the store failed to read or write",
    "database is locked": "another process held the store locked for too long; retry when it is done",
    "database disk image is malformed": "the store file is damaged; restore it from a copy",
    "file is not a database": "the file is not a memaudit store (or is damaged); check --db",
}


def store_fault(exc: BaseException, path) -> StoreError | None:
    """The one-line error for a store fault (read-only file, full disk …), or None when `exc` is
    not one of them (a bug keeps its traceback)."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return None
    for phrase, advice in STORE_FAULTS.items():
        if phrase in str(exc):
            return StoreError(f"{exc}: {advice}", file=str(path) if path is not None else None)
    return None


@contextmanager
def faults(path, *, conflicts: bool = False):
    """Store faults raised inside become StoreError naming `path`. With `conflicts` (rows from
    outside, an import), a constraint the rows break does too, marked `conflict`: there it is the
    input's damage, not a bug."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        if not conflicts:
            raise
        raise StoreError(f"duplicate or inconsistent record ({exc})", file=str(path), conflict=True) from None
    except sqlite3.DatabaseError as exc:
        fault = store_fault(exc, path)
        if fault is None:
            raise
        raise fault from None


@contextmanager
def not_a_store(path):
    """Opening or inspecting a file that is no memaudit store: one StoreError naming it."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        raise store_fault(exc, path) or StoreError(f"not a memaudit store: {exc}", file=str(path)) from None
