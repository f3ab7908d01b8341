"""The report's Know/Act and carry-over parts: two index sections and one page per utilization
pass that lists every case down to its scenario, both answers, both judge verdicts and the oracle's
re-answers (memaudit/utilization/). Read from the store only."""
from __future__ import annotations

from memaudit.report.columns import Resolve, declared
from memaudit.report.html import INDEX, dl, esc, num, page, slug
from memaudit.store import Store
from memaudit.tables.carryover import CARRYOVER
from memaudit.tables.paper_render import title
from memaudit.tables.utilization import COUNT_NAMES, COUNTS, UTILIZATION, load_cases, outcome



def cases_page(run: str, k: int) -> str:
    return f"runs/{slug(run)}/utilization_k{k}.html"


def index_sections(tables: dict, resolve: Resolve) -> str:
    """The utilization and carry-over tables as declared; a utilization row's run and counts link
    to its pass's cases (each count to its group there), other links as `resolve` says."""
    def to_cases(column, row: dict, key: str):
        if column.link == "cases":
            return cases_page(row["run"], row["k"]), (key if key in COUNTS else None)
        return resolve(column, row, key)

    parts = [f"<h2>{esc(title('utilization'))}</h2>"]
    rows = tables.get("utilization") or []
    parts.append('<p class="note">Know = recovered at or above the threshold in retrieve mode at k; Act = a blind '
                 "judge picked the memory-backed answer over the no-memory baseline in both orders.</p>")
    parts.append(declared(UTILIZATION, rows, to_cases) if rows
                 else '<p class="muted">not measured (run `memaudit utilization`)</p>')
    carry = tables.get("carryover") or []
    parts.append(f"<h2>{esc(title('carryover'))}</h2>")
    parts.append(declared(CARRYOVER, carry, resolve) if carry else '<p class="muted">nothing recorded</p>')
    return "".join(parts)


async def write_pages(store: Store, writer, tables: dict) -> None:
    for r in tables.get("utilization") or []:
        path = cases_page(r["run"], r["k"])
        cases = await load_cases(store, r["run"], r["k"])
        writer.write(path, page(path, f"{r['run']} · Know/Act at k={r['k']}", _cases(cases, r),
                                [(INDEX, "report")]))


def _cases(cases: list[dict], row: dict) -> str:
    groups: dict[str, list[dict]] = {name: [] for name in (*COUNTS, "failed")}
    for c in cases:
        decided = c["status"] == "ok" and c["know"] is not None
        groups[outcome(c["know"], c["act"]) if decided else "failed"].append(c)
    parts = [dl([("threshold", num(row["threshold"], 2)), ("targets", str(row["targets"])),
                 ("order disagreements", str(row["order_disagreements"]))])]
    for name, found in groups.items():
        parts.append(f'<h2 id="{name}">{esc(COUNT_NAMES.get(name, name))} ({len(found)})</h2>')
        parts += [_case(c) for c in found]
    return "\n".join(parts)


def _verdicts(verdicts: list[dict]) -> str:
    return "".join(f"<li>{esc(v.get('order'))}: {esc(v.get('shaped', ''))} → {esc(v.get('picked', ''))} "
                   f"<span class=\"muted\">{esc(v.get('reason') or v.get('note'))}</span></li>" for v in verdicts)


def _case(c: dict) -> str:
    head = (f"{esc(c['user_id'])} · {esc(c['category'])} · {esc(c['dimension'])} · know score "
            f"{num(c['know_score'], 2)} · act {esc(c['act'] or '—')}")
    if c["oracle"]:
        head += f" · oracle {esc(c['oracle'])}"
    body = [f"<p><b>scenario</b>: {esc(c['scenario'])}</p>",
            f"<p><b>answer with memory</b></p><pre>{esc(c['answer'])}</pre>",
            f"<p><b>baseline (no memory)</b></p><pre>{esc(c['baseline'])}</pre>",
            f"<p><b>judge, both orders</b></p><ul>{_verdicts(c['verdicts'])}</ul>"]
    for step in c["oracle_steps"]:
        if "skipped" in step:
            body.append(f"<p><b>oracle {esc(step['step'])}</b>: skipped, {esc(step['skipped'])}</p>")
            continue
        injected = "".join(f"<li>{esc(t)}</li>" for t in step["injected"])
        body.append(f"<p><b>oracle {esc(step['step'])}</b>: {esc(step['act'])}; injected:</p><ul>{injected}</ul>"
                    f"<pre>{esc(step['answer'])}</pre><ul>{_verdicts(step['verdicts'])}</ul>")
    if c["error"]:
        body.append(f"<p class=\"muted\">error: {esc(c['error'])}</p>")
    anchor = slug(f"{c['user_id']}-{c['dimension']}")
    return f'<details class="card" id="{anchor}"><summary>{head}</summary>{"".join(body)}</details>'
