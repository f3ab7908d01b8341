"""Configured secrets kept out of everything a server sends back.

A server, or a proxy in front of it, may copy the request's `Authorization` header (or its URL's
query) into an ordinary answer. Whatever comes back is therefore cleaned where it enters memaudit
(memaudit/llm/transport.py for live answers and error bodies, memaudit/llm/batch.py for a batch's
result lines), before it is parsed, cached, stored, logged, rendered or handed to a memory library:
every configured secret (`Settings.secrets`: the key of every role, panel judge and embeddings
endpoint, the password of a `user:key@` URL and its Basic header value, a key in a URL's query) is
replaced by `***`. The cache then holds the cleaned answer, so replay stays exact.

What was removed is counted for the command (`counting_echoes`, opened by the CLI around a
command), which says so once: "the server echoed the API key N times; removed"."""
from __future__ import annotations

import base64
import contextvars
import re
from contextlib import contextmanager
from dataclasses import dataclass, field

from yarl import URL

from memaudit.errors import REDACTED

# A secret shorter than this is no credential a provider issues (local servers take any key, often
# "EMPTY" or "x"): replacing it would rewrite ordinary words of every answer.
MIN_SECRET_CHARS = 8
# Query parameters that carry a credential (`?api-key=…`, `?key=…`, `?code=…`, `?sig=…`); others
# (`?api-version=2024-06-01`) are settings whose values are ordinary text.
KEY_PARAMETER = re.compile(r"(?i)key|token|secret|sig|auth|pass|credential|code")


@dataclass
class Echoes:
    """How many secrets the answers of one command held (and lost)."""
    count: int = 0

    def line(self) -> str:
        return f"the server echoed the API key {self.count} time{'s' * (self.count != 1)}; removed"


_echoes: contextvars.ContextVar[Echoes | None] = contextvars.ContextVar("memaudit_echoes", default=None)


@contextmanager
def counting_echoes():
    """Count, in the Echoes yielded, the secrets removed from answers while this block runs."""
    echoes = Echoes()
    token = _echoes.set(echoes)
    try:
        yield echoes
    finally:
        _echoes.reset(token)


def url_secrets(url: str) -> list[str]:
    """The credentials a base URL carries: `user:key@` (the key, both together and their Basic header
    value) and the values of its key-like query parameters."""
    parsed = URL(url.strip())
    found = []
    if parsed.user is not None:
        pair = f"{parsed.user}:{parsed.password or ''}"
        found += [pair, base64.b64encode(pair.encode()).decode(), parsed.password or ""]
    found += [value for name, value in parsed.query.items() if KEY_PARAMETER.search(name)]
    return found


@dataclass(frozen=True)
class Secrets:
    """The secrets of a command's settings, longest first (a key containing another goes whole)."""
    values: tuple[str, ...] = ()
    _pattern: re.Pattern | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, secrets) -> "Secrets":
        kept = sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True)
        return cls(tuple(kept), re.compile("|".join(map(re.escape, kept))) if kept else None)

    def text(self, value: str) -> str:
        """`value` with every secret replaced by `***` (counted for the command)."""
        if self._pattern is None or not value:
            return value
        cleaned, removed = self._pattern.subn(REDACTED, value)
        if removed:
            echoes = _echoes.get()
            if echoes is not None:
                echoes.count += removed
        return cleaned

    def answer(self, value):
        """A parsed JSON answer with every string in it (keys too) cleaned. Iterative: a hostile answer
        nests deeper than Python's recursion allows."""
        if self._pattern is None:
            return value
        root = [value]
        stack = [(root, 0)]
        while stack:
            holder, at = stack.pop()
            item = holder[at]
            if isinstance(item, str):
                holder[at] = self.text(item)
            elif isinstance(item, list):
                stack.extend((item, i) for i in range(len(item)))
            elif isinstance(item, dict):
                cleaned = {self.text(k): v for k, v in item.items()}
                item.clear()
                item.update(cleaned)
                stack.extend((item, k) for k in list(item))
        return root[0]

    def body(self, data: bytes) -> bytes:
        """An answer's raw body (an error's, which need not be JSON) with every secret replaced."""
        if self._pattern is None:
            return data
        text = data.decode("utf-8", "replace")
        cleaned = self.text(text)
        return data if cleaned == text else cleaned.encode()



def configured(settings) -> Secrets:
    """The secrets of a command's settings (config.Settings.credentials)."""
    keys, urls = settings.credentials()
    return Secrets.of([*keys, *(secret for url in urls for secret in url_secrets(url))])
