"""Errors a user can act on. The CLI prints them as one line and exits 2; anything else is a bug."""
from __future__ import annotations

import re

# Credentials that may ride along in a server's message or a URL: bearer tokens, `user:key@` in a
# URL, a URL's query, and OpenAI-style keys quoted on their own.
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;}]+")
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]+@")
_KEY_LIKE = re.compile(r"\bsk-[A-Za-z0-9_-]{6,}")
# A URL's query: some hosts take the key as `?api-key=…`, so every query of a URL is hidden whole.
_QUERY = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s?#\"'<>]*)\?[^\s#\"'<>]*")
REDACTED = "***"


def scrub(text: str, secrets=()) -> str:
    """`text` without credentials: every given secret, bearer tokens, URL userinfo and queries, sk- keys."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = redact_url(text)
    return _KEY_LIKE.sub("sk-" + REDACTED, text)


def redact_url(url: str) -> str:
    """A URL fit to print or store: `http://user:key@host/v1?api-key=K` -> `http://***@host/v1?***`."""
    url = _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", url)
    return _QUERY.sub(lambda m: m.group(1) + "?" + REDACTED, url)


class MemauditError(Exception):
    """Base class: an error with a message fit for one line on stderr."""


class BadInput(MemauditError):
    """Bad benchmark, config or store input; names the file, user and field where known."""

    def __init__(self, message: str, *, file: str | None = None, user: str | None = None,
                 field: str | None = None):
        self.file, self.user, self.field = file, user, field
        where = ", ".join(f"{k} {v}" for k, v in (("file", file), ("user", user), ("field", field)) if v)
        super().__init__(f"{where}: {message}" if where else message)


class StoreError(BadInput):
    """A fault of the store file or its place (read-only, full disk, locked, damaged, not a store,
    written by a newer memaudit) or, for rows from outside (an import), a row the store refuses: the
    one error the store raises for what SQLite reports, one line naming the file. `conflict` marks
    the refused row (a duplicate key), which the importer names by the record it came from."""

    def __init__(self, message: str, *, file: str | None = None, conflict: bool = False):
        self.detail, self.conflict = message, conflict
        super().__init__(message, file=file)


class CacheMiss(MemauditError):
    def __init__(self, role: str, key: str, advice: str = "run without --cache replay to call the model"):
        self.role, self.key = role, key
        super().__init__(f"cache miss for role {role} (key {key}); {advice}")


class ContextOverflow(MemauditError):
    """The prompt does not fit the model's context window (estimated before, or reported by the server)."""

    def __init__(self, role: str, tokens: int | None, window: int | None, detail: str = ""):
        self.role, self.tokens, self.window = role, tokens, window
        super().__init__(f"context overflow for role {role}: {overflow_size(tokens, window)}"
                         + (f" ({detail})" if detail else ""))


def overflow_size(tokens: int | None, window: int | None) -> str:
    """`~9000 tokens > window 8192`, or what is known when the server only said it did not fit."""
    if tokens is None and window is None:
        return "the server reported that the prompt does not fit"
    return f"~{tokens if tokens is not None else '?'} tokens > window {window if window is not None else '?'}"


class InvalidOutput(MemauditError):
    """The model's answer stayed invalid after the repair budget; carries the raw text."""

    def __init__(self, role: str, raw: str, problem: str):
        self.role, self.raw, self.problem = role, raw, problem
        super().__init__(f"invalid output from role {role}: {problem}; raw: {raw[:200]!r}")


class Refusal(InvalidOutput):
    """The model or the endpoint refused the content of this request (a content filter, a refusal
    message): an outcome of the request, recorded like an answer that stayed invalid."""

    def __init__(self, role: str, message: str):
        self.role, self.raw, self.problem = role, message, f"the model refused: {message[:200]}"
        MemauditError.__init__(self, f"refusal from role {role}: {message[:200]}")


class EndpointError(MemauditError):
    """The endpoint is misconfigured (wrong key, URL, model or parameter: 401/403/404 and other
    refusals of the request's form) or stayed unreachable after retries. Fatal for the command and
    never recorded as a call's outcome: once the endpoint is fixed, the same command succeeds.
    Credentials (`secrets`, bearer tokens, URL userinfo) are scrubbed from the message."""

    def __init__(self, message: str, *, status: int | None = None, url: str | None = None, secrets=()):
        self.status = status
        self.url = redact_url(url) if url else None
        self.message = scrub(message, secrets)
        where = f" {self.url}" if self.url else ""
        said = f" {status}" if status else ""
        super().__init__(f"endpoint{where} error{said}: {self.message}")


def failure_note(exc: Exception) -> str:
    """A stable one-line description of a model failure: the same whether the call was made now or
    read back from the cache by replay (the exceptions' own messages differ between the two)."""
    if isinstance(exc, ContextOverflow):
        return f"context overflow: {overflow_size(exc.tokens, exc.window)}"
    if isinstance(exc, InvalidOutput):
        return f"invalid output from {exc.role}: {exc.problem}"
    return str(exc)
