"""`--shard I/N`: a study split into N parts that run anywhere (a Slurm array task, a Kubernetes
indexed Job pod), each into its own store, later joined by `memaudit merge`.

The unit of work is a (system, user) cell: a user's episodes with one memory system, their scores,
attributions and Know/Act cases. A cell belongs to shard I of N when sha256("system\\0user") taken
as a number is I-1 modulo N: stable across machines, processes and Python versions (no `hash()`),
and independent of the order of users or systems, so every shard of every stage agrees on it.
A shard records its runs exactly as an unsharded study does (the run config names every user of
the study), so the merged store is the one an unsharded run would have made."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from memaudit.errors import BadInput

_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    def holds(self, system: str, user_id: str) -> bool:
        return cell_shard(system, user_id, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


WHOLE = Shard(1, 1)  # an unsharded command: every cell


def cell_shard(system: str, user_id: str, count: int) -> int:
    """The 1-based shard of N that the (system, user) cell belongs to."""
    digest = hashlib.sha256(f"{system}\0{user_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count + 1


def parse_shard(text: str | None) -> Shard:
    """`3/16` -> Shard(3, 16); None -> WHOLE; anything else a one-line error."""
    if text is None:
        return WHOLE
    match = _SPEC.fullmatch(text)
    if match is None:
        raise BadInput(f"--shard expects I/N such as 3/16 (1-based), got {text!r}", field="shard")
    index, count = int(match[1]), int(match[2])
    if count < 1 or not 1 <= index <= count:
        raise BadInput(f"--shard {text}: I must be between 1 and N (N at least 1)", field="shard")
    return Shard(index, count)
