"""Files a user points memaudit at (a price list, a batch runner's output): read whole only when
each is a regular file within a size limit. A FIFO would block the read forever (deaf to SIGTERM
while inside it), a device such as /dev/zero never ends, a folder is no file, and a file larger
than anything memaudit writes or reads there is a mistake or an attack: each is refused in one line
naming the file before a byte of it is read. A symlink is followed, and what it points at is
checked the same way."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from memaudit.errors import BadInput

MIB = 1024 * 1024


def read_bytes(path: Path, what: str, limit: int) -> bytes:
    """The bytes of the regular file at `path` (`what` it should be, for the error), at most `limit`."""
    try:
        # Non-blocking: opening a FIFO for reading would otherwise wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise BadInput(f"cannot read the {what}: {exc.strerror or exc}", file=str(path)) from None
    with os.fdopen(fd, "rb") as f:
        mode, size = os.fstat(fd).st_mode, os.fstat(fd).st_size
        if not stat.S_ISREG(mode):
            raise BadInput(f"the {what} is not a regular file ({_kind(mode)}); refused", file=str(path))
        if size > limit:
            raise BadInput(f"the {what} is {size:,} bytes, over the {limit:,}-byte limit; refused", file=str(path))
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise BadInput(f"cannot read the {what}: {exc.strerror or exc}", file=str(path)) from None
    if len(data) > limit:  # it grew while being read
        raise BadInput(f"the {what} is over the {limit:,}-byte limit; refused", file=str(path))
    return data


def read_text(path: Path, what: str, limit: int) -> str:
    """As read_bytes, decoded as UTF-8."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"the {what} is not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r})",
                       file=str(path)) from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"
