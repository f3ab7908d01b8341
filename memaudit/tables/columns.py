"""Every table declared once, as a list of columns. A column names its header, the row values it
shows, how they read as text, which outputs show it and, for the HTML report, what its cell links
to. md and latex lay out the cells from it, csv and json carry exactly the row keys it declares
(in the row's order), and the report draws its HTML table from the same list
(memaudit/report/columns.py): a new column is one entry in its table's declaration plus its value
in the row builder. The paper's tables are declared here (their rows: memaudit/tables/paper.py);
utilization, carry-over, evolving and judges next to their maths."""
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
    # run | mode | number | summary (mean ± std [95% CI]) | interval (value [95% CI]: the second key,
    # else `<key>_ci95`) | ci (an interval alone) | versus (a paired difference: diff [CI] p) |
    # verdicts (✓/✗ per criterion) | human (agreement with human grades) | mark (* when true) |
    # hash (its first 19 characters) | models | text
    kind: str = "number"
    digits: int = 3
    extra: tuple[str, ...] = ()  # further row keys csv and json carry with this column
    outputs: frozenset = OUTPUTS
    # The report's drill-down: run (its page) | pass (the mode's pass) | overflow (its list) |
    # label (the list of the targets with the key's attribution label)
    link: str | None = None
    short: str | None = None  # the report's narrower header, explained by its legend
    blank: str = "n/a"  # how a text or mode cell without a value reads in md and latex
    # interval: its missing interval reads "n/a" (evolving) instead of being left out
    ci_na: bool = False
    # A wall time measured on the machine that made the run: replay does not compare it.
    measured: bool = False

    def data_keys(self) -> tuple[str, ...]:
        """The row keys csv and json carry for this column: a summary carries its std and interval."""
        if self.kind == "summary":
            return tuple(k for key in self.keys for k in (key, f"{key}_std", f"{key}_ci95")) + self.extra
        if self.kind == "interval":
            return (self.keys[0], self.interval_key()) + self.extra
        return tuple(dict.fromkeys(key.split(".")[0] for key in self.keys)) + self.extra

    def interval_key(self) -> str:
        return self.keys[1] if len(self.keys) > 1 else f"{self.keys[0]}_ci95"


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


# Footprint quantiles over users (the lower order statistic).
FOOTPRINT = (
    Column("run", ("run",), "run", link="run"),
    Column("system", ("system",), "text", outputs=NOT_TEXT),
    Column("users", ("users",)),
    Column("items p50", ("items_p50",), digits=0),
    Column("items p90", ("items_p90",), digits=0),
    Column("chars p50", ("chars_p50",), digits=1),
    Column("chars p90", ("chars_p90",), digits=1),
    # What the memory system cost at rollout (issue 32): seconds of an episode's writes and of a read.
    Column("write s/episode p50/p95", ("write_p50", "write_p95"), digits=3, measured=True),
    Column("search s p50/p95", ("search_p50", "search_p95"), digits=3, measured=True),
    Column("memory calls/user", ("memory_calls",), digits=1),
    Column("memory tokens/user", ("memory_tokens",), digits=0),
    Column("write failures", ("memory_write_failures",), link="run"),
)


def measured_keys(columns) -> frozenset[str]:
    """The row keys of the columns that hold machine measurements (replay leaves them out)."""
    return frozenset(key for column in columns if column.measured for key in column.data_keys())

# The per-user gap B(dump_all) − B(retrieve); json carries each user's gap.
GAP = (
    Column("run", ("run",), "run", link="run"),
    Column("system", ("system",), "text", outputs=NOT_TEXT),
    Column("users", ("users",)),
    *(Column(key, (key,)) for key in ("mean", "median", "min", "max")),
    Column("per user", ("per_user",), outputs=DATA),
)

# Token usage per role group. Reasoning tokens are part of the completion tokens (as the API counts
# them), not added to the total.
TOKENS = (
    Column("run", ("run",), "run", link="run"),
    Column("system", ("system",), "text", outputs=NOT_TEXT),
    Column("role", ("role",), "text"),
    Column("calls", ("calls",)),
    Column("prompt", ("prompt_tokens",)),
    Column("completion", ("completion_tokens",)),
    Column("of which reasoning", ("reasoning_tokens",)),
    Column("cached", ("cached_tokens",)),
    Column("total", ("total_tokens",)),
)

# Paired comparisons of per-user B; the last column marks a Holm-adjusted p under 0.05.
COMPARISONS = (
    Column("mode", ("mode",), "text"),
    Column("a", ("a",), "text"),
    Column("b", ("b",), "text"),
    Column("users", ("users",)),
    Column("diff (a − b)", ("diff",)),
    Column("95% CI", ("ci95",), "ci"),
    Column("p", ("p",), digits=4),
    Column("p Holm", ("p_holm",), digits=4),
    Column("", ("significant",), "mark", short="p Holm < 0.05"),
)

# Which prompt directory (name, hash) each number of a run was made with.
PROMPTS = (
    Column("run", ("run",), "run", link="run"),
    Column("stage", ("stage",), "text"),
    Column("mode", ("mode",), "mode", extra=("k",), blank=""),
    Column("prompts", ("prompts",), "text"),
    Column("hash", ("hash",), "hash"),
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
    key = column.keys[0]
    if column.kind == "run":
        return row["run"] + (" (partial)" if row.get("partial") else "") + teacher_forced_mark(row)
    if column.kind == "mode":
        return column.blank if row.get("mode") is None else mode_label(row)
    if "." not in key and key not in row:  # a row without this column (judge-check's per-category rows)
        return ""
    if column.kind in KIND_TEXT:
        return KIND_TEXT[column.kind](row[key])
    if column.kind == "summary":
        return pm(row, key, column.digits)
    if column.kind == "interval":
        return interval_text(row[key], row.get(column.interval_key()), column.digits, na=column.ci_na)
    if column.kind == "models":
        return models_text(row["models"])
    if column.kind == "text":
        return column.blank if row[key] is None else str(row[key])
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


def interval_text(found, ci, digits: int = 3, *, na: bool = False) -> str:
    """`value [low, high]`; a missing interval is left out, or with `na` reads "n/a"."""
    if na or (found is not None and ci is not None):
        return f"{num(found, digits)} {ci_text(ci)}"
    return num(found, digits)


def versus_text(versus: dict | None) -> str:
    """A paired difference from a baseline: `diff [low, high] p=…`."""
    return "n/a" if versus is None else f"{num(versus['diff'])} {ci_text(versus['ci95'])} p={num(versus['p'], 4)}"


def verdicts_text(verdicts: list[bool]) -> str:
    return "".join("✓" if v else "✗" for v in verdicts) or "–"


def human_text(found: dict | None) -> str:
    """A rater's agreement with the human grades of the targets both scored."""
    if found is None:
        return "n/a"
    return f"κ {num(found['kappa_quadratic'])}, exact {num(found['exact'])}, ±1 {num(found['within_one'])} (n={found['n']})"


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


# The kinds whose cell reads the same in every output: the text of the column's one value.
KIND_TEXT = {"ci": ci_text, "versus": versus_text, "verdicts": verdicts_text, "human": human_text,
             "mark": lambda found: "*" if found else "", "hash": lambda found: (found or "")[:19]}
