"""`memaudit view --serve`: the report's pages from disk and each user's data produced from the store
when the browser asks for it, on loopback only.

Why: a static report with every user's transcripts and memories holds about 0.14 MiB per user-run
compressed (35 MiB for the published 50 users) and most of its time goes into writing them; served,
the report on disk is only its tables and pages, and a user's data costs nothing until someone opens
that user. The data files are the ones a static report would hold
(report/userdata.py), so the same page renders both."""
from __future__ import annotations

import http.server
import threading
from functools import partial
from typing import Callable

import anyio
import anyio.from_thread
import anyio.to_thread
from anyio.lowlevel import EventLoopToken, current_token

from memaudit.report import userdata
from memaudit.report.view import Report

LOOPBACK = "127.0.0.1"


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Files under the report folder (the standard handler keeps paths inside it), and
    /data/<bench>/<user>.js from the store (read in the command's event loop)."""

    def __init__(self, *args, report: Report, users: dict, loop: EventLoopToken, **kwargs):
        self.report, self.users, self.loop = report, users, loop
        super().__init__(*args, **kwargs)

    def do_GET(self):  # noqa: N802 (the standard handler's name)
        path = self.path.split("?", 1)[0]
        prefix, suffix = f"/{userdata.DATA_DIR}/", ".js"
        if not (path.startswith(prefix) and path.endswith(suffix)):
            return super().do_GET()
        found = self.users.get(path[len(prefix):-len(suffix)])
        if found is None:
            return self.send_error(404, "no such user in this report")
        body = anyio.from_thread.run(self.report.user_data, *found, token=self.loop)
        self.send_response(200)
        self.send_header("Content-Type", f"text/javascript; charset={userdata.CHARSET}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 — one line per request would flood the terminal
        pass


async def serve_report(report: Report, port: int = 0, *, started: Callable[[str], None] = print) -> None:
    """Serve the report on http://127.0.0.1:<port>/ until cancelled (port 0: a free one);
    `started` gets the URL once it listens. One request at a time: a report has one reader."""
    handler = partial(_Handler, report=report, users=report.users(), loop=current_token(),
                      directory=str(report.index.parent))
    server = http.server.HTTPServer((LOOPBACK, port), handler)
    # Its own thread, started before anything can cancel: `shutdown()` waits for `serve_forever`
    # to end, and would wait forever for one that a cancelled worker never began.
    thread = threading.Thread(target=server.serve_forever, name="report-server", daemon=True)
    thread.start()
    try:
        started(f"http://{LOOPBACK}:{server.server_address[1]}/{report.index.name}")
        await anyio.sleep_forever()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(server.shutdown)
        server.server_close()
