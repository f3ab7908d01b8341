"""Errors a user can act on. The CLI prints them as one line and exits 2; anything else is a bug."""
from __future__ import annotations


class MemauditError(Exception):
    """Base class: an error with a message fit for one line on stderr."""


class BadInput(MemauditError):
    """Bad benchmark, config or store input; names the file, user and field where known."""

    def __init__(self, message: str, *, file: str | None = None, user: str | None = None,
                 field: str | None = None):
        self.file, self.user, self.field = file, user, field
        where = ", ".join(f"{k} {v}" for k, v in (("file", file), ("user", user), ("field", field)) if v)
        super().__init__(f"{where}: {message}" if where else message)


class CacheMiss(MemauditError):
    def __init__(self, role: str, key: str):
        self.role, self.key = role, key
        super().__init__(f"cache miss for role {role} (key {key}); run without --cache replay to call the model")


class ContextOverflow(MemauditError):
    """The prompt does not fit the model's context window (estimated before, or reported by the server)."""

    def __init__(self, role: str, tokens: int | None, window: int | None, detail: str = ""):
        self.role, self.tokens, self.window = role, tokens, window
        super().__init__(f"context overflow for role {role}: ~{tokens} tokens > window {window}"
                         + (f" ({detail})" if detail else ""))


class InvalidOutput(MemauditError):
    """The model's answer stayed invalid after the repair budget; carries the raw text."""

    def __init__(self, role: str, raw: str, problem: str):
        self.role, self.raw, self.problem = role, raw, problem
        super().__init__(f"invalid output from role {role}: {problem}; raw: {raw[:200]!r}")


class EndpointError(MemauditError):
    """The endpoint refused the request or stayed unreachable after retries."""

    def __init__(self, message: str, *, status: int | None = None, url: str | None = None):
        self.status, self.url, self.message = status, url, message
        where = f"{url} " if url else ""
        super().__init__(f"endpoint {where}error{f' {status}' if status else ''}: {message}")

    @property
    def transient(self) -> bool:
        """Unreachable or still failing after every retry (no status from a refusal): not an answer
        about this call, so it aborts the command instead of being recorded; a rerun resumes."""
        return self.status is None
