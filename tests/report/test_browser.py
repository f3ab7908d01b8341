"""The report in a real browser: headless Chromium renders the index and follows the drill-down
from disk (file://) down to the disclosing transcript line, which the user's page renders from its
data file; a screenshot is saved. Not skipped: Chromium is installed when missing (CI's .ci/run does the same)."""
from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from memaudit.report.view import write_report
from memaudit.store import open_store
from tests.report import synthetic
from tests.report.test_view import follow, link_to

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


def rendered(profile: Path, url: str) -> str:
    """The DOM after the page's scripts ran (the user views load and decode their data first)."""
    return headless(profile, "--virtual-time-budget=10000", "--dump-dom", url)


def test_drill_down_chain_renders_in_chromium(tmp_path):
    """Table 2 cell -> pass page -> the user's grid -> the target -> its read, the judge's verdict,
    the attribution and the cited transcript line, each step following a link of the page before."""
    index = anyio.run(_report, tmp_path)
    profile = tmp_path / "profile"

    dom = headless(profile, "--dump-dom", index.as_uri())
    assert "Table 2" in dom and "0.600" in dom and "0.525" in dom and "90.0" in dom
    assert "<svg" in dom and "recovery rate" in dom

    pass_page = follow(index, "0.525")                      # B top-k of mem0
    grid_page, fragment = link_to(pass_page, "user_001", "Per user")
    dom = rendered(profile, f"{grid_page.as_uri()}#{fragment}")
    assert "burns food when multitasking (user_001)" in dom and 'class="cell fail"' not in dom
    cell = re.search(r'<td class="cell s50" title="memory_failure"><a href="#([^"]+)">0.50<span class="mark">M', dom)
    assert cell, "the grid's mem0 retrieve cell of cooking_skill"

    dom = rendered(profile, f"{grid_page.as_uri()}#{html.unescape(cell.group(1))}")
    assert "user_001 · cooking_skill" in dom and "top-5 retrieved items (1)" in dom
    assert "User cooks dinner while answering email &amp; burns it" in dom       # the read
    assert "judge on cooking_skill" in dom and "<b>memory_failure</b>" in dom    # judge, attribution
    assert "<mark>I always burn the rice when I try to do two things at once</mark> &lt;b&gt;" in dom
    assert 'id="mem0-e1-t1"' in dom and "cited by retrieve stage 1 · disclosure" in dom

    shot = tmp_path / "target.png"
    # A window that holds the whole page: headless Chromium paints nothing above an anchor it had to
    # scroll to in a screenshot (a real browser does), and the target page carries its legend above it.
    headless(profile, "--virtual-time-budget=10000", f"--screenshot={shot}", "--window-size=1280,2400",
             f"{grid_page.as_uri()}#{html.unescape(cell.group(1))}")
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")

    user_002 = link_to(pass_page, "user_002", "Per user")[1]
    dom = rendered(profile, f"{grid_page.as_uri()}#{user_002}")
    assert 'class="cell fail"' in dom                      # a failed read is marked, not scored as 0


def test_target_list_renders_and_opens_the_target_in_chromium(tmp_path):
    """Table 4 count -> the list of its targets (rendered from the page's data) -> the target."""
    index = anyio.run(_report, tmp_path)
    profile = tmp_path / "profile"
    listing = follow(index, "1", "Table 4")  # mem0 retrieve memory_failure
    dom = rendered(profile, listing.as_uri())
    found = re.search(r'<a href="([^"]+)">cooking_skill</a>', dom)
    assert found and "user_001" in dom and "1 target." in dom
    page, _, fragment = html.unescape(found.group(1)).partition("#")
    dom = rendered(profile, f"{(listing.parent / page).resolve().as_uri()}#{fragment}")
    assert "user_001 · cooking_skill" in dom and "<b>memory_failure</b>" in dom


def test_served_report_renders_the_drill_down_in_chromium(tmp_path):
    """`view --serve`: the user's data comes from the store over loopback (its bytes declared as
    windows-1252, as the page reads them) and the target view renders from it."""
    from memaudit.report.serve import serve_report
    from memaudit.report.view import build_report

    async def run() -> str:
        async with open_store(tmp_path / "audit.db") as store:
            await synthetic.fill(store)
            report = await build_report(store, tmp_path / "served", user_data="served")
            urls: list[str] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: serve_report(report, started=urls.append))
                while not urls:
                    await anyio.sleep(0.01)
                root = urls[0].removesuffix("index.html")
                target = f"{root}user.html#f=synthetic/user_001&v=target&d=cooking_skill&a=mem0-retrieve_k5"
                dom = await anyio.to_thread.run_sync(rendered, tmp_path / "profile", target)
                tg.cancel_scope.cancel()
        return dom

    dom = anyio.run(run)
    assert "user_001 · cooking_skill" in dom and "top-5 retrieved items (1)" in dom
    assert "<mark>I always burn the rice when I try to do two things at once</mark>" in dom


def test_report_without_user_data_says_how_to_get_it_in_chromium(tmp_path):
    """A static report written with `--user-data none` (or above the auto limit): a user view opened
    from disk says how to get the drill-down instead of failing silently."""
    from memaudit.report.view import build_report

    async def run() -> Path:
        async with open_store(tmp_path / "audit.db") as store:
            await synthetic.fill(store)
            return (await build_report(store, tmp_path / "pages", user_data="none")).index

    index = anyio.run(run)
    dom = rendered(tmp_path / "profile", f"{(index.parent / 'user.html').as_uri()}#f=synthetic/user_001&v=grid")
    assert "this report was written without its users' data" in dom and "--user-data all" in dom
