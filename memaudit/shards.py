"""`--shard I/N`: a study split into N parts that run anywhere (a Slurm array task, a Kubernetes
indexed Job pod), each into its own store, later joined by `memaudit merge`.

The unit of work is a (system, user) cell: a user's episodes with one memory system, their scores,
attributions and Know/Act cases. A cell belongs to shard I of N when sha256("system\\0user") taken
as a number is I-1 modulo N: stable across machines, processes and Python versions (no `hash()`),
and independent of the order of users or systems, so every shard of every stage agrees on it.
A shard records its runs exactly as an unsharded study does (the run config names every user of
the study), so the merged store is the one an unsharded run would have made.

`--shard auto` reads the shard from the scheduler that started the process (`from_scheduler`): a Slurm
job array, a Kubernetes Indexed Job or a launcher that sets RANK and WORLD_SIZE."""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from typing import Mapping

from memaudit.errors import BadInput

_SPEC = re.compile(r"\s*([0-9]{1,9})\s*/\s*([0-9]{1,9})\s*")
_DIGITS = re.compile(r"[0-9]{1,9}")


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


def parse_shard(text: str | None, env: Mapping[str, str] | None = None) -> Shard:
    """`3/16` -> Shard(3, 16); `auto` -> the scheduler's (`from_scheduler`); None -> WHOLE; anything
    else a one-line error."""
    if text is None:
        return WHOLE
    if text.strip() == "auto":
        return from_scheduler(os.environ if env is None else env)
    match = _SPEC.fullmatch(text)
    if match is None:
        raise BadInput(f"--shard expects I/N such as 3/16 (1-based) or auto, got {text!r}", field="shard")
    index, count = int(match[1]), int(match[2])
    if count < 1 or not 1 <= index <= count:
        raise BadInput(f"--shard {text}: I must be between 1 and N (N at least 1)", field="shard")
    return Shard(index, count)


# What `--shard auto` reads, in this order: the first scheduler whose index variable is set decides.
# Slurm: the task's id in an array of any start and step (`--array=10-12`, `--array=0-30:10`).
SLURM = ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT")
# Kubernetes Indexed Job: the 0-based completion index; the count is ours to give (the pod is not told).
KUBERNETES = ("JOB_COMPLETION_INDEX", "MEMAUDIT_SHARDS")
# torchrun, mpirun-style launchers: a 0-based rank of WORLD_SIZE.
LAUNCHER = ("RANK", "WORLD_SIZE")
SCHEDULERS = (SLURM, KUBERNETES, LAUNCHER)


def from_scheduler(env: Mapping[str, str]) -> Shard:
    """The shard of this process from its scheduler's variables; none set: a one-line error naming
    every variable looked for."""
    # Set, even empty, decides: an empty SLURM_ARRAY_TASK_ID is a broken Slurm job, not a launcher's.
    names = next((names for names in SCHEDULERS if names[0] in env), None)
    if names is None:
        looked = "; ".join("/".join(names) for names in SCHEDULERS)
        raise BadInput(f"--shard auto: no scheduler variables set (looked for {looked}); give --shard I/N",
                       field="shard")
    missing = [name for name in names[1:] if not env.get(name)]
    if missing:
        raise BadInput(f"--shard auto: {names[0]} is set but {', '.join(missing)} is not", field="shard")
    if names is SLURM:
        task, first, count = (_whole(env, name) for name in SLURM)
        step = _whole(env, "SLURM_ARRAY_TASK_STEP") if env.get("SLURM_ARRAY_TASK_STEP") else 1
        if step < 1 or (task - first) % step:
            raise BadInput(f"--shard auto: Slurm array task {task} is not on the array's grid (start {first}, "
                           f"step {step}); give the array as a range such as --array=1-{count}", field="shard")
        return _checked(f"Slurm array task {task} (array start {first})", (task - first) // step + 1, count)
    index, count = names
    return _checked(f"{index}={env[index]}", _whole(env, index) + 1, _whole(env, count))


def _whole(env: Mapping[str, str], name: str) -> int:
    """A scheduler's number: ASCII digits only (Python's int() also reads `1_0` as 10, ` 7`, `+7`
    and other scripts' digits), at most 9 of them; a bad value is named shortened."""
    value = env.get(name, "")
    if not _DIGITS.fullmatch(value):
        shown = value if len(value) <= 40 else f"{value[:40]}… ({len(value)} characters)"
        raise BadInput(f"--shard auto: {name} must be a whole number, got {shown!r}", field="shard")
    return int(value)


def _checked(where: str, index: int, count: int) -> Shard:
    if count < 1 or not 1 <= index <= count:
        raise BadInput(f"--shard auto: {where} gives shard {index} of {count}, outside 1..{count}", field="shard")
    return Shard(index, count)
