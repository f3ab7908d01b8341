"""Tables 2, 3 and 4 declared once, as lists of columns. A column names its header, the row values
it shows, how they read as text, which outputs show it and, for the HTML report, what its cell
links to. md and latex lay out the cells from it, csv and json carry exactly the row keys it
declares (in the row's order), and the report draws its HTML table from the same list: a new
column is one entry here plus its value in the row builder (memaudit/tables/paper.py)."""
from __future__ import annotations

from dataclasses import dataclass

from memaudit.types import ATTRIBUTION_LABELS, CATEGORIES

OUTPUTS = frozenset({"md", "latex", "csv", "json", "html"})
NOT_TEXT = frozenset({"csv", "json", "html"})  # shown in the report and carried as data, not in md/latex
DATA = frozenset({"csv", "json"})


@dataclass(frozen=True)
class Column:
    header: str
    # The row values the cell shows, in order; two read "a/b" (full-store/top-k); `map.key` is a
    # value inside a map the row carries (csv and json carry the whole map).
    keys: tuple[str, ...]
    kind: str = "number"  # run | mode | number | summary (mean ± std [95% CI]) | models | text
    digits: int = 3
    extra: tuple[str, ...] = ()  # further row keys csv and json carry with this column
    outputs: frozenset = OUTPUTS
    # The report's drill-down: run (its page) | pass (the mode's pass) | overflow (its list) |
    # label (the list of the targets with the key's attribution label)
    link: str | None = None
    short: str | None = None  # the report's narrower header, explained by its legend

    def data_keys(self) -> tuple[str, ...]:
        """The row keys csv and json carry for this column: a summary carries its std and interval."""
        if self.kind == "summary":
            return tuple(k for key in self.keys for k in (key, f"{key}_std", f"{key}_ci95")) + self.extra
        return tuple(dict.fromkeys(key.split(".")[0] for key in self.keys)) + self.extra


# Table 2: task outcome, preference, recovery at the headline k, footprint, failures, cost, models.
TABLE2 = (
    Column("run", ("run",), "run", extra=("partial", "teacher_forced", "source_run"), link="run"),
    Column("system", ("system",), "text", outputs=NOT_TEXT),
    Column("users", ("users",), outputs=NOT_TEXT, link="run"),
    Column("A (%)", ("A",), "summary", 1, link="run"),
    Column("D (/5)", ("D",), "summary", 2, link="run"),
    Column("C", ("C",), "summary", 2, extra=("C_satisfied",), link="run"),
    Column("B full-store", ("B_dump_all",), "summary", link="pass"),
    Column("B top-k", ("B_retrieve",), "summary", extra=("retrieve_k",), link="pass"),
    Column("items", ("items",), digits=1, extra=("items_std",), link="run"),
    Column("chars/item", ("chars",), digits=1, extra=("chars_std",), link="run"),
    Column("overflow dump/top-k", ("overflow_dump_all", "overflow_retrieve"), link="overflow"),
    Column("failed dump/top-k", ("failed_dump_all", "failed_retrieve")),
    Column("failed episodes", ("failed_episodes",), link="run"),
    Column("fallbacks", ("simulator_fallbacks",), link="run"),
    Column("judge failures", ("pref_judge_failures",), link="run"),
    Column("memory write failures", ("memory_write_failures",), link="run"),
    Column("tokens", ("tokens",), link="run"),
    Column("B/Mtok dump/top-k", ("B_dump_all_per_Mtok", "B_retrieve_per_Mtok")),
    Column("models", ("models",), "models", outputs=OUTPUTS - {"csv"}),  # a map: csv rows keep flat values only
)


# Table 3: recovery per category in each scored pass (mode and k) of a run.
TABLE3 = (
    Column("run", ("run",), "run", link="run"),
    Column("system", ("system",), "text", outputs=NOT_TEXT),
    Column("mode", ("mode",), "mode", extra=("k",), link="pass"),
    Column("users", ("users",), outputs=NOT_TEXT),
    *(Column(key, (key,), "summary", link="pass") for key in (*CATEGORIES, "overall")),
)

# Table 4: the attribution label counts of each attributed pass, and the recovery rates they give.
TABLE4_SHORT = {"ok": "Recovered", "memory_failure": "Memory", "task_design_failure": "Task",
                "agent_elicitation_failure": "Agent", "simulator_too_strict": "User", "no_targeted_task": "No task",
                "unclassified": "Unclassified", "overflow": "Overflow"}
TABLE4 = (
    Column("run", ("run",), "run", link="run"),
    Column("system", ("system",), "text", outputs=NOT_TEXT),
    Column("mode", ("mode",), "mode", extra=("k",), link="pass"),
    *(Column(label, (label,), link="label", short=TABLE4_SHORT[label]) for label in ATTRIBUTION_LABELS),
    Column("recovery_rate", ("recovery_rate",), short="recovery rate"),
    # The rate the published code would report: overflow targets counted as the stages label them
    # (json carries every count as published: `published_equivalent`; a map, so not in csv).
    Column("rate as published", ("published_equivalent.recovery_rate",), outputs=OUTPUTS - {"csv"}),
)


def shown(columns, output: str) -> list[Column]:
    return [c for c in columns if output in c.outputs]


def project(row: dict, columns, output: str) -> dict:
    """The row as csv or json carry it: the keys the output's columns declare, in the row's order."""
    keys = {key for column in shown(columns, output) for key in column.data_keys()}
    return {key: value for key, value in row.items() if key in keys}


def text_table(columns, rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Header and cells for md and latex (both show the same columns)."""
    columns = shown(columns, "md")
    return [c.header for c in columns], [[cell_text(c, row) for c in columns] for row in rows]


def cell_text(column: Column, row: dict) -> str:
    if column.kind == "run":
        return row["run"] + (" (partial)" if row.get("partial") else "") + teacher_forced_mark(row)
    if column.kind == "mode":
        return mode_label(row)
    if column.kind == "summary":
        return pm(row, column.keys[0], column.digits)
    if column.kind == "models":
        return models_text(row["models"])
    if column.kind == "text":
        return str(row[column.keys[0]])
    return "/".join(num(value(row, key), column.digits) for key in column.keys)


def value(row: dict, key: str):
    """A row value by its column key (`map.key`: inside a map; a missing map reads as None)."""
    name, _, inner = key.partition(".")
    return (row.get(name) or {}).get(inner) if inner else row[key]


def mode_label(row: dict) -> str:
    return row["mode"] if row.get("k") is None else f"{row['mode']}@{row['k']}"


# -- cell formatters of md and latex ------------------------------------------------------------

def num(value, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def pm(row: dict, key: str, digits: int = 3) -> str:
    """`mean ± std [low, high]`, dropping what is missing."""
    if row.get(key) is None:
        return "n/a"
    text = num(row[key], digits)
    if row.get(f"{key}_std") is not None:
        text += f" ± {num(row[f'{key}_std'], digits)}"
    ci = row.get(f"{key}_ci95")
    if ci is not None:
        text += f" [{num(ci[0], digits)}, {num(ci[1], digits)}]"
    return text


def ci_text(ci) -> str:
    return "n/a" if ci is None else f"[{num(ci[0])}, {num(ci[1])}]"


def models_text(models: dict) -> str:
    """`gpt-4o-mini` when every role used it, else `model: role, role; model: role`."""
    by_model: dict[str, list[str]] = {}
    for role, model in models.items():
        by_model.setdefault(model, []).append(role)
    if len(by_model) == 1:
        return next(iter(by_model))
    return "; ".join(f"{model}: {', '.join(roles)}" for model, roles in sorted(by_model.items())) or "–"


def teacher_forced_mark(row: dict) -> str:
    """After a run id: its memory was fed another run's transcripts, whose A, C and D these are."""
    return f" (teacher-forced on {row['source_run']})" if row.get("teacher_forced") else ""
