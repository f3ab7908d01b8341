"""The report in a real browser: headless Chromium renders the index and a target page from
disk (file://), the dumped DOM shows the table numbers and the disclosing transcript line, and a
screenshot is saved. Not skipped: Chromium is installed when missing (CI's .ci/run does the same)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from memaudit.report.view import write_report
from memaudit.store import open_store
from tests.report import synthetic

pytestmark = pytest.mark.browser


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=True)
        found = shutil.which("chromium")
    assert found, "chromium is required for the report test"
    return found


def headless(profile: Path, *args: str) -> str:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    return done.stdout


async def _report(tmp_path: Path) -> Path:
    async with open_store(tmp_path / "audit.db") as store:
        await synthetic.fill(store)
        return await write_report(store, tmp_path / "report")


def test_report_renders_in_chromium(tmp_path):
    index = anyio.run(_report, tmp_path)
    profile = tmp_path / "profile"

    dom = headless(profile, "--dump-dom", index.as_uri())
    assert "Table 2" in dom and "0.600" in dom and "0.525" in dom and "90.0" in dom
    assert "<svg" in dom and "recovery rate" in dom

    target = tmp_path / "report/users/synthetic/user_001/cooking_skill.html"
    dom = headless(profile, "--dump-dom", target.as_uri() + "#mem0-retrieve_k5")
    assert "<mark>I always burn the rice when I try to do two things at once</mark>" in dom
    assert "memory_failure" in dom and "User cooks dinner while answering email &amp; burns it" in dom

    for name, page in (("index", index), ("target", target)):
        shot = tmp_path / f"{name}.png"
        headless(profile, f"--screenshot={shot}", "--window-size=1280,900", page.as_uri())
        assert shot.stat().st_size > 10_000
        print(f"screenshot: {shot}")
