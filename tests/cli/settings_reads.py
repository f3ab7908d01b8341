"""Which of its settings a command reads, for tests/cli/test_command_options.py.

`Reads.traced(settings)` is a copy of the command's Settings whose fields count as read when any
code but `dataclasses` reads them. A copy made from it by `dataclasses.replace` counts only the
fields replace carried over: a value the library sets itself (replay's cache mode) is not the
user's setting. Settings the library makes on its own (check-adapter's fake model) are not counted."""
from __future__ import annotations

import dataclasses
import sys
import threading

from memaudit.config import Settings

FIELDS = frozenset(f.name for f in dataclasses.fields(Settings))
REPLACE = dataclasses.replace.__code__


class Reads:
    def __init__(self):
        self.names: set[str] = set()
        self.carried = threading.local()  # the fields the running replace() read from its original
        self.traced_class = _traced_class(self)

    def traced(self, settings: Settings) -> Settings:
        copy = self.traced_class(**{name: getattr(settings, name) for name in FIELDS})
        object.__setattr__(copy, "_counted", FIELDS)
        return copy


def _traced_class(reads: Reads) -> type:
    class Traced(Settings):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            caller = sys._getframe(1)
            counted = frozenset()
            if caller.f_code is REPLACE:
                original = caller.f_locals["obj"]
                counted = object.__getattribute__(original, "_counted") & getattr(reads.carried, "names", set())
            reads.carried.names = set()
            object.__setattr__(self, "_counted", counted)

        def __getattribute__(self, name):
            if name in FIELDS:
                if sys._getframe(1).f_code is REPLACE:
                    reads.carried.names = getattr(reads.carried, "names", set()) | {name}
                elif name in object.__getattribute__(self, "_counted"):
                    reads.names.add(name)
            return object.__getattribute__(self, name)

    return Traced
