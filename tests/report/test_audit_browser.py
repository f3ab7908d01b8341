"""The human audit page in a real browser: headless Chromium loads audit.html inside a small
harness page (same directory, file access allowed), picks a level for every target as a grader
copying the judge `low` would, reloads the page (the grades come back from localStorage), exports
them (the file download itself is stubbed), and the exported JSON is imported with `memaudit human import`: exact agreement 1.0."""
from __future__ import annotations

import html
import json
import re

import anyio
import orjson
import pytest

from memaudit.cli import main
from tests.judges.test_human import FLAGS, scored, targets_of
from tests.report.test_browser import headless

pytestmark = pytest.mark.browser

HARNESS = """<!DOCTYPE html><html><body><pre id="out">pending</pre>
<iframe id="page" src="audit.html" width="900" height="600"></iframe>
<script>
var grades = %s;
var frame = document.getElementById('page');
var loads = 0;
frame.addEventListener('load', function () {
  var doc = frame.contentDocument;
  loads += 1;
  if (loads === 1) {
    var grader = doc.getElementById('grader');
    grader.value = 'browser-grader';
    grader.dispatchEvent(new Event('input'));
    Object.keys(grades).forEach(function (id) {
      doc.querySelector('input.level[data-id="' + id + '"][value="' + grades[id] + '"]').click();
    });
    frame.contentWindow.location.reload();
    return;
  }
  var restored = doc.querySelectorAll('input.level:checked').length;
  // The save-file download is noted, not performed: a pending download keeps headless Chromium open.
  var saved = null;
  frame.contentWindow.HTMLAnchorElement.prototype.click = function () { saved = this.download; };
  doc.getElementById('export').click();
  document.getElementById('out').textContent = JSON.stringify(
    {restored: restored, saved: saved, exported: JSON.parse(doc.getElementById('exported').value)});
});
</script></body></html>
"""


def test_grade_export_and_import_in_chromium(settings, fake, tmp_path, capsys):
    anyio.run(scored, settings, fake)
    main(["--db", str(settings.db), "view", "--out", str(tmp_path / "report"), "--audit", "5"])
    page = tmp_path / "report" / "audit.html"
    targets = targets_of(page)
    harness = tmp_path / "report" / "harness.html"
    harness.write_text(HARNESS % json.dumps({t["id"]: "0" for t in targets}))

    dom = headless(tmp_path / "profile", "--allow-file-access-from-files", "--virtual-time-budget=15000",
                   "--dump-dom", harness.as_uri())
    found = json.loads(html.unescape(re.search(r'<pre id="out">(.*?)</pre>', dom, re.S).group(1)))
    assert found["restored"] == len(targets)  # the grades survived a reload (localStorage)
    assert found["saved"] == "grades-browser-grader.json"
    exported = found["exported"]
    assert exported["grader"] == "browser-grader"
    assert [g["id"] for g in exported["grades"]] == [t["id"] for t in targets]

    grades = tmp_path / "grades.json"
    grades.write_bytes(orjson.dumps(exported))
    capsys.readouterr()
    main(["--db", str(settings.db), *FLAGS, "human", "import", str(grades)])
    out = capsys.readouterr().out
    assert f"imported {len(targets)} grade(s) by browser-grader" in out
    assert re.search(r"^low vs human: .*exact 1\.000", out, re.M)
