"""Every kind of link the report makes opens on a page a reader sees something on, in a 1400×1000
window (issue 44): headless Chromium, driven over its DevTools protocol, follows one link of each
kind — from the index and every page it writes, and from the pages the user view's script draws —
and each viewport is captured as it stands after the page's scripts ran and scrolled to their
anchor (a user view opened on a section, `user.html#…&a=…`). A capture that is one colour is a
blank page.

(Chromium's `--screenshot` switch captures the top of the document, not a view the page scrolled:
an anchored user view read blank that way while it showed its section. The protocol's capture is of
the viewport a reader has.)"""
from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import parse_qsl, urldefrag, urlparse

import anyio
import pytest
from PIL import Image

from memaudit.report.view import write_report
from memaudit.store import open_store
from tests.report import synthetic
from tests.report.test_browser import chromium

pytestmark = pytest.mark.browser

WIDTH, HEIGHT = 1400, 1000
SETTLE = 1.5  # seconds after the load event for the user view to decode its data and draw
MOST_OF_ONE_COLOUR = 0.985  # a capture with more of one colour than this is blank


class Browser:
    """One headless Chromium page over the DevTools protocol (loopback only)."""

    def __init__(self, profile: Path):
        self.process = subprocess.Popen(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--remote-debugging-address=127.0.0.1",
             "--remote-debugging-port=0", f"--user-data-dir={profile}", "about:blank"],
            stderr=subprocess.PIPE, text=True)
        browser_url = self._devtools_url()
        from websockets.sync.client import connect

        port = urlparse(browser_url).port
        target = json.loads(_http(port, "PUT", "/json/new?about:blank"))
        self.stack = ExitStack()
        self.socket = self.stack.enter_context(connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=30))
        self.ids = 0
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT, deviceScaleFactor=1, mobile=False)

    def _devtools_url(self) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                return found.group(1)
        raise AssertionError("Chromium did not start its DevTools endpoint")

    def call(self, method: str, **params):
        self.ids += 1
        self.socket.send(json.dumps({"id": self.ids, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == self.ids:
                assert "error" not in message, (method, message["error"])
                return message.get("result", {})

    def open(self, url: str) -> None:
        """Load `url` afresh (about:blank first: a link that only changes the fragment loads too)."""
        self.call("Page.navigate", url="about:blank")
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + 30
        while self.evaluate("document.readyState") != "complete" and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(SETTLE)

    def evaluate(self, expression: str):
        return self.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")

    def links(self) -> list[str]:
        return self.evaluate("[...document.querySelectorAll('a[href]')].map((a) => a.href)") or []

    def viewport(self) -> Image.Image:
        shot = self.call("Page.captureScreenshot", format="png")
        return Image.open(io.BytesIO(base64.b64decode(shot["data"]))).convert("RGB")

    def close(self) -> None:
        self.stack.close()
        self.process.terminate()
        self.process.wait(timeout=30)


def _http(port: int, method: str, path: str) -> str:
    import httpx

    return httpx.request(method, f"http://127.0.0.1:{port}{path}", timeout=30).text


def link_kind(url: str, root: Path) -> tuple | None:
    """What kind of link `url` is: the page it opens (names of runs and passes left out), and for the
    user view which view and whether it opens on an anchor. None: not a page of the report."""
    page, fragment = urldefrag(url)
    if not page.startswith(root.as_uri()):
        return None
    rel = Path(urlparse(page).path).relative_to(root).parts
    shape = (rel[0], len(rel)) if len(rel) > 1 else rel
    params = dict(parse_qsl(fragment))
    if rel == ("user.html",):
        return (*shape, params.get("v", "grid"), "a" in params, "d" in params)
    return (*shape, "#" if fragment else "")


def blank(image: Image.Image) -> bool:
    most = max(count for count, _ in image.getcolors(maxcolors=image.width * image.height))
    return most > MOST_OF_ONE_COLOUR * image.width * image.height


async def _report(tmp_path: Path) -> Path:
    async with open_store(tmp_path / "audit.db") as store:
        await synthetic.fill(store)
        return await write_report(store, tmp_path / "report")


def test_every_kind_of_link_opens_on_a_page_with_something_in_view(tmp_path):
    index = anyio.run(_report, tmp_path)
    root = index.parent
    browser = Browser(tmp_path / "profile")
    try:
        browser.open("about:blank")
        assert blank(browser.viewport())  # what a blank page captures as
        pending, seen, opened = [index.as_uri()], set(), {}
        while pending and len(opened) < 60:  # every kind once; a report has a few dozen
            url = pending.pop(0)
            kind = link_kind(url, root) if url != index.as_uri() else ("index",)
            if kind is None or kind in opened:
                continue
            browser.open(url)
            opened[kind] = url
            assert not blank(browser.viewport()), f"a blank {WIDTH}×{HEIGHT} viewport behind {url}"
            for found in browser.links():
                if found not in seen:
                    seen.add(found)
                    pending.append(found)
    finally:
        browser.close()
    kinds = {kind[0] for kind in opened}
    assert {"index", "runs", "user.html"} <= kinds, opened
    user_views = {kind[1:] for kind in opened if kind[0] == "user.html"}
    assert any(anchored for _, anchored, _ in user_views), "no user view opened on an anchor"  # the blank
    assert {"grid", "target", "episodes"} <= {view for view, *_ in user_views}, user_views
