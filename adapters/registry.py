"""Memory systems by name: the built-ins plus third-party adapters registered through the
`memaudit.adapters` entry-point group (`name = "package.module:AdapterClass"`)."""
from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points

from memaudit.errors import BadInput

BUILTIN = {
    "nomem": "memaudit.adapters.nomem:NoMemory",
    "longctx_full": "memaudit.adapters.longctx_full:LongContextFull",
    "mem0": "memaudit.adapters.mem0:Mem0",
    "mem0ai": "memaudit.adapters.mem0ai:Mem0AI",
    "amem": "memaudit.adapters.amem:AMem",
    "memt": "memaudit.adapters.memt:MemT",
    "simple_rag": "memaudit.adapters.simple_rag:SimpleRag",
    "bm25": "memaudit.adapters.bm25:BM25Memory",
    "file_memory": "memaudit.adapters.file_memory:FileMemory",
}


@functools.cache  # scanning the installed distributions costs ~15 ms, and commands ask often
def _targets() -> dict[str, str]:
    found = dict(BUILTIN)
    for ep in entry_points(group="memaudit.adapters"):
        found.setdefault(ep.name, ep.value)
    return found


def available() -> list[str]:
    return sorted(_targets())


def get_adapter(name: str):
    targets = _targets()
    if name not in targets:
        raise BadInput(f"unknown memory system {name!r}; available: {', '.join(sorted(targets))}", field="systems")
    module, _, attr = targets[name].partition(":")
    return getattr(importlib.import_module(module), attr)


def system_of(run: str) -> str:
    """The system a run id belongs to: `amem_pooled_50` -> `amem` (longest known prefix wins)."""
    names = sorted(_targets(), key=len, reverse=True)
    for name in names:
        if run == name or run.startswith(name + "_"):
            return name
    return run.split("_", 1)[0]
