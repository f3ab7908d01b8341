"""A scratch library in an environment of its own, for the worker protocol's tests: its
"environment" is the test's own Python (MEMAUDIT_SCRATCHNOTES_PYTHON), its library a list of notes
whose ids and times it draws as libraries do (uuid4, datetime.now: the logical clock answers them
in the worker). A note saying `fail` makes the op raise (a library's error); `exit` ends the worker."""
from __future__ import annotations

import os
import sys
import uuid
from datetime import datetime

from memaudit.adapters.environment import InEnvironment, python_variable
from memaudit.adapters.environment_worker import LibraryWorker

ENVIRONMENT = "scratchnotes"
os.environ.setdefault(python_variable(ENVIRONMENT), sys.executable)


class NotesWorker(LibraryWorker):
    PATCHED = __name__

    async def open(self) -> str:
        self.notes: list[dict] = []
        return "1.0"

    async def add(self, text: str) -> None:
        if text == "fail":
            raise ValueError("the scratch library refuses this note")
        if text == "exit":
            os._exit(3)
        self.notes.append({"id": str(uuid.uuid4()), "content": text, "at": datetime.now().isoformat()})

    async def search(self, query: str, k: int) -> list[dict]:
        uuid.uuid4()  # a search draws an id too (a library logging its queries)
        ranked = sorted(self.notes, key=lambda note: -len(set(query.split()) & set(note["content"].split())))
        return [{**note, "score": None} for note in ranked[:k]]

    async def dump(self) -> list[dict]:
        return self.notes


class NotesMemory(InEnvironment):
    name = "scratchnotes"
    library = "memaudit-bench"  # a distribution the test's Python has: the "library's" version
    ENVIRONMENT = ENVIRONMENT
    WORKER = NotesWorker
    CALLS_PER_MESSAGE = 0.0
