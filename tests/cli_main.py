"""The command line in-process, for tests: the exit code a shell would see."""
from __future__ import annotations

from memaudit.cli import main


def memaudit(*args) -> int:
    """Run `memaudit ARGS…` in this process and return its exit code (0 when it returns)."""
    try:
        main([str(a) for a in args])
    except SystemExit as exc:
        return exc.code or 0
    return 0
