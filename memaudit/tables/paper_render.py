"""The paper's tables as text: `render` writes what memaudit/tables/paper.py computed as md, latex,
csv or json, every table from its one declaration (memaudit/tables/columns.py and beside its maths)."""
from __future__ import annotations

import csv
import io

import orjson

from memaudit.errors import BadInput
from memaudit.tables import evolving
from memaudit.tables.columns import ci_text, common_legend, legend, mode_label, num, project, text_table
from memaudit.tables.judges_render import PER_JUDGE, judges_tables
from memaudit.tables.paper import DECLARED

# The order the sections are written in.
SECTIONS = ("table2", "table3", "table4", "footprint", "health", "gap", "tokens", "comparisons", "utilization", "carryover",
            "prompts", "evolving", "evolving_targets", "judges", "robustness")


def render(tables: dict, fmt: str) -> str:
    """The tables present in `tables` as md, latex, csv or json text."""
    if fmt == "json":
        return orjson.dumps(as_data(tables, "json"), option=orjson.OPT_INDENT_2).decode()
    if fmt == "csv":
        return _render_csv(tables)
    if fmt in ("md", "latex"):
        return _render_text(tables, latex=fmt == "latex")
    raise BadInput(f"unknown format {fmt!r}; use md, latex, csv or json", field="format")


def _robustness(rob: dict):
    header = ["measure", "value"]
    body = [["variant", f"{rob['variant']} vs {rob['baseline']}"], ["targets compared", num(rob["targets"])],
            ["exact agreement", num(rob["exact_agreement"])], ["within one level", num(rob["within_one_level"])],
            ["mean signed shift", num(rob["mean_shift"])],
            ["system pairs order preserved", num(rob["system_pairs_preserved"])],
            ["category pairs order preserved", num(rob["category_pairs_preserved"])]]
    for m in rob["modes"]:
        label = mode_label(m)
        body.append([f"{label}: best system", f"{m['best_default']} → {m['best_variant']} "
                                               f"({'preserved' if m['best_preserved'] else 'changed'})"])
        body.append([f"{label}: hardest category", f"{m['hardest_default']} → {m['hardest_variant']}"])
        body.append([f"{label}: easiest category", f"{m['easiest_default']} → {m['easiest_variant']}"])
    for r in rob.get("runs", []):
        body.append([f"{r['run']} {mode_label(r)}: B {rob['baseline']} → {rob['variant']}",
                     f"{num(r['B_baseline'])} → {num(r['B_variant'])} (paired diff {num(r['diff'])} "
                     f"{ci_text(r['diff_ci95'])}, {r['users']} users)"])
    return header, body


def _declared(name: str):
    return lambda rows: text_table(DECLARED[name], rows)


# Each table's title, the same in md, latex, the HTML report and the demo; what its columns and
# cells mean is in their declarations (the legend under each table, `common_legend` above them).
TITLES = {
    "table2": ("Table 2 — task outcome, preference, recovery, footprint", _declared("table2")),
    "table3": ("Table 3 — recovery per category", _declared("table3")),
    "table4": ("Table 4 — failure attribution", _declared("table4")),
    "footprint": ("Footprint distribution over users, and what memory cost at rollout", _declared("footprint")),
    "health": ("Memory health — what each memory system wrote, read and lost", _declared("health")),
    "gap": ("Per-user gap B(dump_all) − B(retrieve)", _declared("gap")),
    "tokens": ("Token usage per role", _declared("tokens")),
    "comparisons": ("Paired comparisons of per-user B", _declared("comparisons")),
    "utilization": ("Know/Act utilization", _declared("utilization")),
    "carryover": ("Preference carry-over and bother rate", _declared("carryover")),
    "prompts": ("Prompts each number was made with (memaudit prompts list)", _declared("prompts")),
    "evolving": ("Evolving targets — FAMA and stale memory", _declared("evolving")),
    "evolving_targets": ("Evolving targets — criteria per target", _declared("evolving_targets")),
    "robustness": ("Robustness — frozen rescoring", _robustness),
}
PREFACE = "Reading these tables"


def title(name: str) -> str:
    return TITLES[name][0]


def _render_text(tables: dict, *, latex: bool) -> str:
    parts = [] if latex else [_md_legend_block(PREFACE, common_legend("md"))]
    for name in SECTIONS:
        if tables.get(name) is None:
            continue
        if name == "judges":  # several tables: memaudit/tables/judges_render.py
            built = judges_tables(tables[name])
        else:
            built = [(title(name), *TITLES[name][1](tables[name]), legend(DECLARED.get(name, ())))]
        for heading, header, body, meanings in built:
            parts.append(_latex_table(heading, header, body) if latex else md_table(heading, header, body, meanings))
    return "\n\n".join(parts) + "\n"


def md_table(heading: str, header: list[str], body: list[list[str]], meanings=()) -> str:
    """A titled md table with its legend: one line per column that needs saying what it means."""
    lines = [f"## {heading}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines) + ("\n\n" + _md_legend(meanings) if meanings else "")


def _md_legend(meanings) -> str:
    return "\n".join(f"- **{name}**: {meaning}" for name, meaning in meanings)


def _md_legend_block(heading: str, meanings) -> str:
    return f"## {heading}\n\n{_md_legend(meanings)}"


def _tex(text: str) -> str:
    for char, escaped in (("\\", r"\textbackslash{}"), ("_", r"\_"), ("%", r"\%"), ("&", r"\&"), ("#", r"\#"),
                          ("±", r"$\pm$"), ("−", "--"), ("→", r"$\to$"), ("*", r"$^{*}$")):
        text = text.replace(char, escaped)
    return text


def _latex_table(title: str, header: list[str], body: list[list[str]]) -> str:
    lines = [r"\begin{table}[t]", r"\centering", r"\small", f"\\caption{{{_tex(title)}}}",
             r"\begin{tabular}{" + "l" * len(header) + "}", r"\toprule",
             " & ".join(_tex(h) for h in header) + r" \\", r"\midrule"]
    lines += [" & ".join(_tex(c) for c in cells) + r" \\" for cells in body]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines)


def _flat(row: dict) -> dict:
    """A CSV row: intervals become `_low`/`_high` columns; nested per-user maps stay in the JSON."""
    out = {}
    for key, value in row.items():
        if key in evolving.VERDICT_LISTS:  # lists of yes/no criteria, not intervals
            out[key] = ";".join(str(int(v)) for v in value)
        elif isinstance(value, list):
            out[f"{key}_low"], out[f"{key}_high"] = (value if value else (None, None))
        elif not isinstance(value, dict):
            out[key] = value
    return out


def render_csv_section(rows: list[dict]) -> str:
    flat = [_flat(r) for r in rows]
    columns = list(dict.fromkeys(key for r in flat for key in r))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in flat)
    return buffer.getvalue()


def csv_sections(tables: dict) -> list[tuple[str, list[dict]]]:
    """(name, rows) of every table present; robustness splits into its summary, per-mode and per-run
    rows."""
    sections = []
    tables = as_data(tables, "csv")
    for name in SECTIONS:
        rows = tables.get(name)
        if rows is None:
            continue
        if name == "robustness":
            sections.append((name, [{k: v for k, v in rows.items() if k not in ("modes", "runs")}]))
            sections.append(("robustness_modes", rows["modes"]))
            sections.append(("robustness_runs", rows["runs"]))
        elif name == "judges":
            sections.append(("judges", rows["per_judge"]))
            sections.append(("judges_pairs", (rows["agreement"] or {}).get("pairs") or []))
        else:
            sections.append((name, rows))
    return sections


def as_data(tables: dict, output: str) -> dict:
    """The tables as csv or json carry them: a declared table keeps the keys its columns name."""
    out = {**tables, **{name: [project(row, columns, output) for row in tables[name]]
                        for name, columns in DECLARED.items() if tables.get(name) is not None}}
    if tables.get("judges") is not None:
        out["judges"] = {**tables["judges"],
                         "per_judge": [project(row, PER_JUDGE, output) for row in tables["judges"]["per_judge"]]}
    return out


def _render_csv(tables: dict) -> str:
    return "\n".join(f"# {name}\n" + render_csv_section(rows) for name, rows in csv_sections(tables))
