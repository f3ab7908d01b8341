"""Files a user points memaudit at (a checkout, a price list, a batch result): read whole only when
they are what they claim to be. A path is refused in one line, before anything is read or written,
when it is not a regular file (a directory, a FIFO, a device: opened without blocking, so a FIFO
never hangs), when it leads outside the folder it must stay in (a symlink or `..`: `ids.inside`), or
when it holds more than the reader's limit (checked before and while reading, so `/proc` files that
report no size are bounded too)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from memaudit.errors import BadInput
from memaudit.ids import inside

KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
         (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"))


def read_regular(path: Path, *, limit: int, root: Path | None = None, label: str | None = None) -> bytes:
    """The bytes of the regular file `path` (at most `limit` of them), provided it stays under `root`
    when one is given; else BadInput naming `label` (default: the path)."""
    where = label or str(path)
    if root is not None:
        inside(root, path, label=where)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise BadInput("not found", file=where) from None
    except OSError as exc:
        raise BadInput(f"cannot be read ({exc.strerror})", file=where) from None
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            kind = next((name for test, name in KINDS if test(found.st_mode)), "not a regular file")
            raise BadInput(f"{kind}, not a regular file; refused", file=where)
        if found.st_size > limit:
            raise BadInput(f"larger than {limit:,} bytes; refused", file=where)
        data = _read_at_most(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:  # a file that reports a size smaller than it is (/proc)
        raise BadInput(f"larger than {limit:,} bytes; refused", file=where)
    return data


def _read_at_most(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
