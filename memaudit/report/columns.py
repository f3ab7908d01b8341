"""The report's side of the table declarations (memaudit/tables/columns.py): one HTML table from a
table's declared columns, read from the same rows md and latex read. Numbers sit in right-aligned
cells with an em dash for a missing value; a cell whose column declares a link goes where the
caller's `resolve` sends it (a run's page, a pass, a list of targets, a utilization pass's cases)."""
from __future__ import annotations

from typing import Callable

from memaudit.report.html import INDEX, esc, legend_list, link, mean_std_text, num, table
from memaudit.tables.columns import Column, cell_text, header, ingest_mark, legend, shown, value

NUMBERS = ("number", "summary", "interval", "versus")
# (column, row, key) -> (page, anchor) the cell links to, or None for no link
Resolve = Callable[[Column, dict, str], "tuple[str, str | None] | None"]


def declared(columns, rows: list[dict], resolve: Resolve | None = None, from_page: str = INDEX) -> str:
    """The HTML table of a declaration: the columns the report shows, under their short headers, and
    the visible legend of what they mean."""
    shown_columns = shown(columns, "html")
    return (table([header(c, short=True) for c in shown_columns],
                  [[cell(c, row, resolve, from_page) for c in shown_columns] for row in rows])
            + legend_list(legend(columns, "html")))


def cell(column: Column, row: dict, resolve: Resolve | None, from_page: str = INDEX) -> str:
    def linked(key: str, text: str) -> str:
        target = resolve(column, row, key) if resolve and column.link else None
        return link(from_page, target[0], text, anchor=target[1]) if target else text

    if column.kind == "run":
        return linked("run", esc(row["run"])) + _partial(row) + _teacher_forced(row) + _ingest(row)
    if column.kind == "mode":
        return linked("mode", esc(mode_name(row)))
    if column.kind in NUMBERS:
        keys = column.keys if column.kind == "number" else column.keys[:1]
        return f'<td class="n">{"/".join(linked(key, html_value(column, row, key)) for key in keys)}</td>'
    if row.get(column.keys[0]) is None and column.kind not in ("models", "mark") and column.blank:
        return "—"
    if column.kind == "models":  # a wide cell rather than a tall row
        return f'<td class="models">{esc(cell_text(column, row))}</td>'
    return esc(cell_text(column, row))


def html_value(column: Column, row: dict, key: str) -> str:
    found = value(row, key)
    if column.kind == "summary":
        text = mean_std_text(found, row.get(f"{key}_std"), column.digits)
        ci = row.get(f"{key}_ci95")
        return text + (f'<br><span class="ci">{interval(ci, column.digits)}</span>' if ci else "")
    if column.kind == "interval":
        return with_interval(found, row.get(column.interval_key()), column.digits)
    if column.kind == "versus":
        return "—" if found is None else f"{with_interval(found['diff'], found['ci95'])} p={num(found['p'], 4)}"
    return "—" if found is None else str(found) if isinstance(found, int) else num(found, column.digits)


def with_interval(found, ci, digits: int = 3) -> str:
    if found is None:
        return "—"
    return num(found, digits) + ("" if not ci else f' <span class="std">{interval(ci, digits)}</span>')


def interval(ci, digits: int = 3) -> str:
    return f"[{num(ci[0], digits)}, {num(ci[1], digits)}]"


def mode_name(row: dict) -> str:
    return f"{row['mode']} k={row['k']}" if row.get("k") else row["mode"]


def _partial(row: dict) -> str:
    return ' <span class="badge partial">partial</span>' if row.get("partial") else ""


def _ingest(row: dict) -> str:
    mark = ingest_mark(row)
    return f' <span class="badge ingest" title="rollout --ingest">{esc(mark.strip(" ()"))}</span>' if mark else ""


def _teacher_forced(row: dict) -> str:
    if not row.get("teacher_forced"):
        return ""
    source = esc(row["source_run"])
    return (f' <span class="badge teacher-forced" title="memory was fed the recorded episodes of {source}: '
            f'A, C and D are the source run&#39;s">teacher-forced on {source}</span>')
