"""Human grades: the audit page's targets and ids, `memaudit human import` (refusing unknown ids
and invalid levels by name), and agreement with every judge and with the panel."""
from __future__ import annotations

import anyio
import orjson
import pytest

from memaudit.cli import main
from memaudit.errors import BadInput
from memaudit.report.human import gradable, import_grades, sample_targets, target_id
from memaudit.tables.judges import judges_section
from memaudit.report.audit import write_audit_page
from memaudit.scoring.recovery import score_runs
from memaudit.store import open_store, select_runs
from tests.judges.helpers import fixed_judges, panel
from tests.scoring.recorded import record, runtime, script

FLAGS = ["--base-url", "http://fake.test/v1", "--model", "fake-model"]


async def scored(settings, fake):
    fixed_judges(script(fake))
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=2, tasks=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"], panel=panel(rt))


async def audit(settings, out, n=6):
    async with open_store(settings.db) as store:
        return await write_audit_page(store, out, ["longctx_full"], n, 0)


def targets_of(page) -> list[dict]:
    html = page.read_text()
    start = html.index('<script type="application/json" id="audit-targets">') + len(
        '<script type="application/json" id="audit-targets">')
    return orjson.loads(html[start:html.index("</script>", start)])


def test_grades_copying_a_judge_agree_exactly(settings, fake, tmp_path, capsys):
    anyio.run(scored, settings, fake)
    page = anyio.run(audit, settings, tmp_path / "report")
    targets = targets_of(page)
    assert len(targets) == 6 and set(targets[0]) == {"id", "run", "mode", "user", "dimension"}
    grades = tmp_path / "grades.json"
    # The judge `low` always gives 0: a grader who copies it.
    grades.write_text(orjson.dumps({"grader": "ana", "grades": [{"id": t["id"], "score": 0} for t in targets]}).decode())
    main(["--db", str(settings.db), *FLAGS, "human", "import", str(grades)])
    out = capsys.readouterr().out
    assert "imported 6 grade(s) by ana" in out
    assert "low vs human: κ n/a, exact 1.000" in out and "top-a vs human" in out and "panel vs human" in out

    async def section():
        async with open_store(settings.db) as store:
            return await judges_section(store, await select_runs(store, None), resamples=0)

    per_judge = {j["model"]: j for j in anyio.run(section)["per_judge"]}
    assert per_judge["low"]["human"]["exact"] == 1.0 and per_judge["low"]["human"]["n"] == 6
    assert per_judge["top-a"]["human"]["exact"] == 0.0


def test_replay_after_human_import_carries_the_grades_and_is_identical(settings, fake, tmp_path, capsys):
    """Human grades are data, not calls: replay copies them and the tables compare equal."""
    anyio.run(scored, settings, fake)
    targets = targets_of(anyio.run(audit, settings, tmp_path / "report"))
    grades = tmp_path / "grades.json"
    grades.write_text(orjson.dumps({"grader": "ana", "grades": [{"id": t["id"], "score": 0.5} for t in targets]})
                      .decode())
    main(["--db", str(settings.db), *FLAGS, "human", "import", str(grades)])
    capsys.readouterr()
    main(["--db", str(settings.db), "replay"])
    assert "identical" in capsys.readouterr().out


@pytest.mark.parametrize("grades, message", [
    ({"grader": "ana", "grades": [{"id": "tnothere", "score": 1}]}, "unknown target id(s) tnothere"),
    ({"grader": "ana", "grades": [{"id": "x1", "score": 0.3}]}, "invalid level for 1 grade(s): x1=0.3"),
    ({"grades": []}, "non-empty \"grader\""),
])
def test_bad_grades_are_refused_by_name(settings, fake, tmp_path, capsys, grades, message):
    anyio.run(scored, settings, fake)
    path = tmp_path / "g.json"
    path.write_text(orjson.dumps(grades).decode())
    with pytest.raises(SystemExit) as info:
        main(["--db", str(settings.db), *FLAGS, "human", "import", str(path)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1 and message in err and "g.json" in err

    async def count():
        async with open_store(settings.db) as store:
            return len(await store.judges.grades(["longctx_full"]))

    assert anyio.run(count) == 0  # nothing half-written


def test_sampling_is_seeded_and_spreads_over_strata():
    rows = [{"run": "r", "mode": "dump_all", "k": 0, "user_id": f"u{i}", "dimension": f"d{i}",
             "category": "skill_memory" if i % 2 else "self_model", "score": 1.0 if i < 8 else 0.0, "label": "x",
             "status": "ok"} for i in range(10)]
    chosen = sample_targets(rows, 4, 0)
    assert chosen == sample_targets(rows, 4, 0)
    assert {(r["category"], r["score"]) for r in chosen} == {("skill_memory", 1.0), ("self_model", 1.0),
                                                              ("skill_memory", 0.0), ("self_model", 0.0)}
    assert len({target_id(r) for r in rows}) == 10


def test_view_audit_writes_the_page(settings, fake, tmp_path):
    anyio.run(scored, settings, fake)
    main(["--db", str(settings.db), "view", "--out", str(tmp_path / "rep"), "--audit", "4"])
    page = tmp_path / "rep" / "audit.html"
    html = page.read_text()
    assert (tmp_path / "rep" / "index.html").exists()
    assert len(targets_of(page)) == 4 and "localStorage" in html and "true value" in html
    assert 'value="0.25"' in html and "the same value" in html  # the rubric from the judge's prompt file
