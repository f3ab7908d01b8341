"""The report's judges part: an index section with the `judges` tables section (panel,
agreement, per-judge B, control-answer flags, human agreement) and, per run scored by a panel, a
drill-down page with every judge's verdict per target. Read from the store only."""
from __future__ import annotations

from memaudit.report.columns import declared
from memaudit.report.html import INDEX, esc, link, num, page, score_class, slug, table
from memaudit.store import Store
from memaudit.tables.judges_render import PER_JUDGE, PER_JUDGE_TITLE, SUMMARY, summary_rows, summary_title
from memaudit.types import DEFAULT_VARIANT



def verdicts_page(run: str) -> str:
    return f"runs/{slug(run)}/judges.html"


def index_section(tables: dict, paneled: list[str]) -> str:
    """The panel's agreement and the per-judge table as declared (memaudit/tables/judges_render.py),
    and a link to every panel-scored run's verdicts."""
    section = tables.get("judges")
    if section is None:
        return '<h2>Judges</h2><p class="muted">nothing judged</p>'
    parts = [f"<h2>{esc(summary_title(section))}</h2>", declared(SUMMARY, summary_rows(section)),
             f"<h3>{esc(PER_JUDGE_TITLE)}</h3>", declared(PER_JUDGE, section["per_judge"])]
    if paneled:
        parts.append("<p>every judge's verdict per target: "
                     + ", ".join(link(INDEX, verdicts_page(r), esc(r)) for r in paneled) + "</p>")
    return "".join(parts)


async def paneled_runs(store: Store, runs: list[str]) -> list[str]:
    return sorted({v["run"] for v in await store.judges.verdicts(runs, DEFAULT_VARIANT)}) if runs else []


async def write_pages(store: Store, writer, runs: list[str]) -> None:
    """One page per panel-scored run: target, truth, prediction, the panel score and each verdict."""
    for run in runs:
        verdicts = await store.judges.verdicts([run], DEFAULT_VARIANT)
        judges = list(dict.fromkeys(v["judge"] for v in verdicts))
        by_target: dict = {}
        for v in verdicts:
            by_target.setdefault((v["mode"], v["k"], v["user_id"], v["dimension"]), {})[(v["judge"], v["repeat"])] = v
        rows = {(r.mode, r.k, r.user_id, r.dimension): r for r in await store.scores.load(run)}
        path = verdicts_page(run)
        body = []
        for key, found in sorted(by_target.items()):
            r = rows[key]
            cells = [esc(f"{r.mode}" + ("" if r.mode == "dump_all" else f"@{r.k}")), esc(r.user_id), esc(r.dimension),
                     esc(r.ground_truth), esc(r.label), _score(r.score, r.judge_reason)]
            cells += [_score(found[(j, 0)]["score"], found[(j, 0)]["reason"] or found[(j, 0)]["error"])
                      if (j, 0) in found else "<td>—</td>" for j in judges]
            body.append(cells)
        html = table(["mode", "user", "dimension", "true value", "prediction", "panel", *judges], body)
        writer.write(path, page(path, f"{run}: every judge's verdict", html, crumbs=[(INDEX, "index")]))


def _score(score, reason) -> str:
    return f'<td class="n {score_class(score)}" title="{esc(reason)}">{num(score, 2)}</td>'
