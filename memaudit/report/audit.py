"""The human audit page (`memaudit view --audit N`): DIR/audit.html lists N sampled targets, each
with the dimension, the true value, the prediction, the memory it was read from and the rubric.
A grader picks a level per target; grades stay in the browser (localStorage) and are exported as
the JSON `memaudit human import` reads (memaudit/report/human.py). One self-contained page: its
script is inline, it needs no server and it reads nothing from the network."""
from __future__ import annotations

import hashlib
from pathlib import Path

import orjson

from memaudit.report.human import gradable, sample_targets, target_id
from memaudit.report.html import count, dl, esc, page
from memaudit.store import Store, dumps_indented
from memaudit.types import RUBRIC

PAGE = "audit.html"
MEMORY_CHARS = 20_000  # of a whole dumped store shown per target; the rest is counted, not shown

SCRIPT = r"""
(function () {
  var targets = JSON.parse(document.getElementById('audit-targets').textContent);
  var key = 'memaudit-audit:' + document.body.dataset.audit;
  var saved = JSON.parse(localStorage.getItem(key) || '{"grader": "", "grades": {}}');
  var grader = document.getElementById('grader');
  grader.value = saved.grader;
  function save() { localStorage.setItem(key, JSON.stringify(saved)); count(); }
  function count() {
    document.getElementById('graded').textContent = Object.keys(saved.grades).length + ' of ' + targets.length;
  }
  grader.addEventListener('input', function () { saved.grader = grader.value; save(); });
  document.querySelectorAll('input.level').forEach(function (input) {
    if (saved.grades[input.dataset.id] === Number(input.value)) { input.checked = true; }
    input.addEventListener('change', function () { saved.grades[input.dataset.id] = Number(input.value); save(); });
  });
  document.getElementById('export').addEventListener('click', function () {
    var grades = targets.filter(function (t) { return t.id in saved.grades; })
                        .map(function (t) { return {id: t.id, score: saved.grades[t.id]}; });
    var text = JSON.stringify({grader: saved.grader, grades: grades}, null, 1);
    document.getElementById('exported').value = text;
    var link = document.createElement('a');
    link.href = URL.createObjectURL(new Blob([text], {type: 'application/json'}));
    link.download = 'grades-' + (saved.grader || 'anonymous') + '.json';
    document.body.appendChild(link);
    link.click();
    link.remove();
  });
  count();
})();
"""


async def write_audit_page(store: Store, out_dir, runs: list[str], n: int, seed: int) -> Path:
    """Sample n targets of the runs and write DIR/audit.html; returns its path."""
    chosen = sample_targets(await gradable(store, runs), n, seed)
    sections = [await _target(store, i, row) for i, row in enumerate(chosen, 1)]
    listed = [{"id": target_id(r), "run": r["run"], "mode": r["mode"], "user": r["user_id"],
               "dimension": r["dimension"]} for r in chosen]
    payload = orjson.dumps(listed).decode().replace("</", "<\\/")
    # Grades are kept per sample: another page (other seed, other runs) starts empty.
    audit_key = hashlib.sha256(payload.encode()).hexdigest()[:16]
    controls = ('<p class="note">Pick one level per target: your grades stay in this browser until you export '
                'them; import the exported file with <code>memaudit human import FILE</code>.</p>'
                '<p><label>grader <input id="grader" autocomplete="off"></label> '
                '<button id="export" type="button">export grades (JSON)</button> '
                '<span id="graded" class="muted"></span></p>'
                '<textarea id="exported" rows="4" cols="100" readonly></textarea>')
    body = (controls + "".join(sections)
            + f'<script type="application/json" id="audit-targets">{payload}</script>'
            + f"<script>{SCRIPT}</script>")
    html = page(PAGE, f"Human audit — {count(len(chosen), 'target')} (seed {seed})", body)
    html = html.replace("<body>", f'<body data-audit="{esc(audit_key)}">', 1)
    path = Path(out_dir) / PAGE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path


async def _target(store: Store, number: int, row: dict) -> str:
    tid = target_id(row)
    full = next(r for r in await store.scores.user_rows([row["run"]], row["user_id"], "default")
                if r["mode"] == row["mode"] and r["k"] == row["k"] and r["dimension"] == row["dimension"])
    levels = "".join(f'<label class="level"><input type="radio" class="level" name="grade-{esc(tid)}" '
                     f'data-id="{esc(tid)}" value="{level.score:g}"> {level.score:g} '
                     f'<span class="muted">{esc(level.meaning)}</span></label><br>' for level in RUBRIC.levels)
    facts = dl([("target", esc(f"{row['run']} · {row['mode']}" + (f" k={row['k']}" if row["mode"] != "dump_all"
                                                                    else "") + f" · {row['user_id']}")),
                ("category", esc(row["category"])), ("dimension", f"<b>{esc(row['dimension'])}</b>"),
                ("explanation", esc(full["explanation"])), ("true value", f"<b>{esc(full['ground_truth'])}</b>"),
                ("prediction", f"<b>{esc(full['label'])}</b>"), ("reader's reason", esc(full["reason"]))])
    memory = await _memory(store, row, full)
    return (f'<section class="audit-target" id="{esc(tid)}"><h2>{number}. {esc(row["dimension"])}</h2>{facts}'
            f"<details><summary>memory it was read from</summary><pre>{esc(memory)}</pre></details>"
            f'<fieldset><legend>your grade</legend>{levels}</fieldset></section>')


async def _memory(store: Store, row: dict, full: dict) -> str:
    """What the reader saw: the retrieved items, or the whole final store (cut at MEMORY_CHARS)."""
    if row["mode"] != "dump_all":
        return dumps_indented((full["evidence"] or {}).get("items", []))
    snapshot = await store.episodes.last_snapshot(row["run"], row["user_id"])
    text = dumps_indented(snapshot["items"] if snapshot else [])
    if len(text) > MEMORY_CHARS:
        text = text[:MEMORY_CHARS] + f"\n… {len(text) - MEMORY_CHARS} more characters"
    return text
