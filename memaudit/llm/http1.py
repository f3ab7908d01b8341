"""Just enough HTTP/1.1 for memaudit's own loopback servers — the recording proxy
(memaudit/llm/proxy.py) and the mock model's server (memaudit/testing/http_server.py): keep-alive
connections, requests with a content-length body, JSON (or raw file) responses."""
from __future__ import annotations

import asyncio

import orjson

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           408: "Request Timeout", 422: "Unprocessable Entity", 429: "Too Many Requests",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes] | None:
    """The next request on a connection: (method, target, headers with lower-case names, body);
    None when the client has closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target = lines[0].split(" ")[:2]
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", 0) or 0))
    return method, target, headers, body


def send_json(writer: asyncio.StreamWriter, status: int, payload, extra: dict | None = None) -> None:
    """Queue one JSON response (the caller drains the writer)."""
    write_body(writer, status, orjson.dumps(payload), "application/json", extra)


def write_body(writer: asyncio.StreamWriter, status: int, data: bytes, content_type: str,
               extra: dict | None = None) -> None:
    """Queue one response with a body of any type (a file's content)."""
    head = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}", f"content-type: {content_type}",
            f"content-length: {len(data)}", *(f"{k}: {v}" for k, v in (extra or {}).items())]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)
