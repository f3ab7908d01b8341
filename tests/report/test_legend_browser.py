"""The report explains itself, measured in headless Chromium as a reader sees it: on the index, a run
page and a target page every table's legend is laid out and visible (not a tooltip); the intervals
of Table 2 are on the page; Table 2 fits a 1400 px window, and its run column stays in view when a
narrower one scrolls it sideways; and each system keeps one colour in every chart panel, a system missing from a panel
shifting no colour (nomem has no retrieve pass), a zero bar is drawn and a missing value reads n/a.

Each page is copied beside itself with a probe script appended, which measures the laid-out page and
writes what it found into the DOM that Chromium dumps."""
from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest

from memaudit.report import userdata
from memaudit.report.view import write_report
from memaudit.store import open_store
from tests.report import synthetic
from tests.report.test_browser import headless

pytestmark = pytest.mark.browser

PROBE = """<script>
setTimeout(function () {
  const shown = (el) => { const r = el.getBoundingClientRect(), s = getComputedStyle(el);
    return r.width > 0 && r.height > 0 && s.display !== "none" && s.visibility === "visible" && s.opacity !== "0"; };
  const found = {legends: [...document.querySelectorAll("dl.legend")].map((dl) => ({
      shown: shown(dl), terms: [...dl.querySelectorAll("dt")].filter(shown).map((dt) => dt.textContent)})),
    intervals: [...document.querySelectorAll(".ci")].filter(shown).length, bars: [], na: 0, sticky: null};
  for (const bar of document.querySelectorAll("[data-series]")) {
    if (bar.tagName === "text") { found.na += 1; continue; }
    found.bars.push([bar.dataset.panel, bar.dataset.series, getComputedStyle(bar).fill, bar.getBoundingClientRect().width]);
  }
  const heading = [...document.querySelectorAll("h2")].find((h) => h.textContent.startsWith("Table 2"));
  const wide = heading && heading.nextElementSibling;
  if (wide) found.overflow = wide.scrollWidth - wide.clientWidth;  // Table 2 wider than the page: > 0
  if (wide) wide.style.width = "600px";  // a narrow window: Table 2 scrolls sideways
  if (wide && wide.scrollWidth > wide.clientWidth) {
    wide.scrollLeft = wide.scrollWidth;  // Table 2 scrolled to its last column
    const cell = wide.querySelector("tbody td"), box = wide.getBoundingClientRect();
    found.sticky = cell.getBoundingClientRect().left >= box.left - 1 && cell.getBoundingClientRect().right <= box.right;
  }
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
}, 3000);
</script>"""


# `amem` sorts before mem0 and has no retrieve pass: a colour by position in a panel would give mem0
# amem's colour in the retrieve panels.
RUNS = (("amem", "amem"), ("mem0", "mem0"), ("nomem", "nomem"))


async def _report(tmp_path: Path) -> Path:
    async with open_store(tmp_path / "audit.db") as store:
        await synthetic.fill(store, RUNS)
        return await write_report(store, tmp_path / "report")


def probed(profile: Path, page: Path, fragment: str = "") -> dict:
    """The probe's findings on `page` (a copy beside it runs the probe) at 1400 px."""
    copy = page.with_name(f"probe-{page.name}")
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = headless(profile, "--virtual-time-budget=15000", "--window-size=1400,1000", "--dump-dom",
                   copy.as_uri() + fragment)
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not run"
    return json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<")
                      .replace("&gt;", ">"))


def all_shown(found: dict) -> set[str]:
    assert found["legends"] and all(legend["shown"] for legend in found["legends"])
    return {term for legend in found["legends"] for term in legend["terms"]}


def test_index_run_and_target_pages_explain_themselves_in_chromium(tmp_path):
    index = anyio.run(_report, tmp_path)
    profile = tmp_path / "profile"

    found = probed(profile, index)
    terms = all_shown(found)
    assert {"run", "mode", "A (%)", "D (/5)", "C", "B full-store", "B top-k", "Memory", "recovery rate"} <= terms
    assert found["intervals"] > 0           # Table 2's intervals are on the page, not in a tooltip
    assert found["overflow"] == 0           # Table 2 fits a 1400 px window: no sideways scroll
    assert found["sticky"] is True          # narrower, Table 2 scrolled to its end: the run column is still in view
    colours: dict[str, set[str]] = {}
    for panel, series, fill, width in found["bars"]:
        colours.setdefault(series, set()).add(fill)
        assert width > 0                    # nomem's 0.000 is drawn, not an empty slot
    assert {len(fills) for fills in colours.values()} == {1}, colours  # one colour per system, every panel
    assert len({next(iter(f)) for f in colours.values()}) == len(colours) == len(RUNS)
    assert len({panel for panel, *_ in found["bars"]}) >= 3  # Table 2's two modes and Table 3's passes
    assert found["na"] >= 1                 # nomem's retrieve pass: n/a

    run_terms = all_shown(probed(profile, index.parent / "runs" / "mem0.html"))
    assert {"A (%)", "C", "D (/5)", "items", "memory write failures"} <= run_terms

    target = f"#f={userdata.data_key('synthetic', 'user_001')}&v=target&d=cooking_skill"
    target_terms = all_shown(probed(profile, index.parent / userdata.APP, target))
    assert {"score", "reconstruction", "memory_failure"} <= target_terms
