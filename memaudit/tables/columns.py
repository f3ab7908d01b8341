"""Every table declared once, as a list of columns. A column names its header, the row values it
shows, how they read as text, which outputs show it and, for the HTML report, what its cell links
to. md and latex lay out the cells from it, csv and json carry exactly the row keys it declares
(in the row's order), and the report draws its HTML table from the same list
(memaudit/report/columns.py): a new column is one entry in its table's declaration plus its value
in the row builder. The paper's tables are declared here (their rows: memaudit/tables/paper.py);
utilization, carry-over, evolving and judges next to their maths."""
from __future__ import annotations

from dataclasses import dataclass, replace

from memaudit.types import ATTRIBUTION_LABELS, CATEGORIES, RUBRIC, USER_INGEST

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
    # hash (its first 19 characters) | models | text | kinds (a count per kind) | yesno
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
    # What the column means, said once: the md legend under its table, the report's legend beside
    # its table and docs/tables.md's "Reading these tables" show this text.
    doc: str = ""
    # A wall time measured on the machine that made the run, or a count of what its call cache held
    # then (a replay answers every call from the cache): replay does not compare it.
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


RUBRIC_TEXT = ", ".join(f"{level.score:g} {level.name}" for level in RUBRIC.levels)

# The columns most tables share, each said once; a table takes them as they are or with its own
# extras and links (`replace`). Their meaning is told once above the tables, not under each.
RUN = Column("run", ("run",), "run", extra=("partial",), link="run",
             doc="the run: one memory system's rollout, `<system>` or `<system>_<tag>`. `(partial)` marks a run "
                 "that played fewer tasks than its benchmark has or was scored only on the targets whose task "
                 "ran (its B is not comparable with full runs); `(teacher-forced on R)` a run whose memory was fed "
                 "the recorded episodes of run R, whose A, C and D these are")
SYSTEM = Column("system", ("system",), "text", outputs=NOT_TEXT, doc="the memory system the run audits")
MODE = Column("mode", ("mode",), "mode", extra=("k",), link="pass",
              doc="how the memory was read for recovery: `dump_all` the whole final store (full-store), "
                  "`retrieve@k` the system's own search for the top k items (top-k)")
USERS = Column("users", ("users",), doc="the users the row's figures are over")
COMMON = (RUN, SYSTEM, MODE, USERS)
# How a summary cell reads (kind "summary"); an interval cell is the value and its interval alone.
SUMMARY_CELL = ("mean ± sample standard deviation over users [95% user-bootstrap interval of the mean]; every "
                "figure is computed per user first; n/a: not measured (a mode not scored, a user without a value)")




EMBED_TRUNCATED = Column("embed truncated", ("embed_truncated",), link="run",
                         doc="footprint: texts the embedding model cut at its window before embedding them (it reads "
                             "the first tokens only: the bundled model 256), stored or searched, over all users; n/a: "
                             "not counted (an embeddings endpoint's or a hub model's window is not known here, or a "
                             "run recorded before)")

# Table 2's failure counts: md, latex, csv and json one column each, the report one column of four.
FAILURES = (
    Column("failed episodes", ("failed_episodes",), link="run", outputs=OUTPUTS - {"html"},
           doc="episodes ended by a failed assistant call (invalid or too long); they stay in A's and C's "
               "denominators"),
    Column("fallbacks", ("simulator_fallbacks",), link="run", outputs=OUTPUTS - {"html"},
           doc="simulated-user turns whose answer stayed invalid and fell back to a neutral follow-up"),
    Column("judge failures", ("pref_judge_failures",), link="run", outputs=OUTPUTS - {"html"},
           doc="assistant replies the preference judge could not rate (left out of D)"),
    Column("memory write failures", ("memory_write_failures",), link="run", outputs=OUTPUTS - {"html"},
           doc="memory-side calls that failed for good, so that write was lost (n/a: the system makes no "
               "memory calls, or an imported run)"),
)

# Table 2: task outcome, preference, recovery at the headline k, footprint, failures, cost, models.
TABLE2 = (
    replace(RUN, extra=("partial", "teacher_forced", "source_run", "ingest"),
            doc=RUN.doc + "; `(ingest: exchange)` a run whose deployed library was given each user message with "
                          "the assistant reply before it (rollout --ingest exchange), beside the same system's "
                          "default run as a sensitivity row"),
    SYSTEM,
    replace(USERS, outputs=NOT_TEXT, link="run"),
    Column("A (%)", ("A",), "summary", 1, link="run",
           doc="task completion: per user, the share of episodes the simulated user ended satisfied, in percent"),
    Column("D (/5)", ("D",), "summary", 2, link="run",
           doc="preference: per user, the mean preference-judge score (1–5) of every assistant reply it could "
               "rate against the user's assistance preferences; a user with no rated reply is left out"),
    Column("C", ("C",), "summary", 2, extra=("C_satisfied",), link="run",
           doc="turns: per user, the mean number of assistant replies per episode (json and csv also carry "
               "`C_satisfied`, over satisfied episodes only)"),
    Column("B full-store", ("B_dump_all",), "summary", link="pass",
           doc="recovery B from the whole final store (dump_all): per user the mean of the five category means of "
               f"the recovery judge's scores ({RUBRIC_TEXT}; `unknown` scores 0); an overflow target counts 0, a failed "
               "one is left out"),
    Column("B top-k", ("B_retrieve",), "summary", extra=("retrieve_k",), link="pass",
           doc="recovery B as for B full-store, from the system's own top-k search (retrieve; k = 5 when scored, "
               "else the smallest k)"),
    Column("items", ("items",), digits=1, extra=("items_std",), link="run",
           doc="footprint: items in the user's final memory, mean over users"),
    Column("chars/item", ("chars",), digits=1, extra=("chars_std",), link="run",
           doc="footprint: mean characters of an item's content in the user's final memory, mean over users"),
    # The report shows it in the memory health table beside Table 2, which fits a 1400 px window so.
    replace(EMBED_TRUNCATED, outputs=OUTPUTS - {"html"}),
    Column("overflow dump/top-k", ("overflow_dump_all", "overflow_retrieve"), link="overflow",
           doc="targets whose memory read did not fit the reader's context window (scored 0 in B), "
               "full-store/top-k"),
    Column("failed dump/top-k", ("failed_dump_all", "failed_retrieve"),
           doc="targets the reader or the judge never answered validly (left out of B), full-store/top-k"),
    *FAILURES,
    # The report groups the four failure counts in one column, so Table 2 fits a 1400 px window.
    Column("failures: episode / fallback / judge / memory", tuple(c.keys[0] for c in FAILURES), link="run",
           outputs=frozenset({"html"}), doc="; ".join(f"{c.header}: {c.doc}" for c in FAILURES)),
    Column("tokens", ("tokens",), link="run",
           doc="prompt + completion tokens of every call the run used (a cached call counted once)"),
    Column("B/Mtok dump/top-k", ("B_dump_all_per_Mtok", "B_retrieve_per_Mtok"),
           doc="B per million tokens, full-store/top-k"),
    # A map: csv rows keep flat values only; the report shows it in its list of runs, not in Table 2.
    Column("models", ("models",), "models", outputs=frozenset({"md", "latex", "json"}),
           doc="the model each role group ran on (one name when every role used it)"),
)


# Table 3: recovery per category in each scored pass (mode and k) of a run.
TABLE3 = (
    RUN,
    SYSTEM,
    MODE,
    replace(USERS, outputs=NOT_TEXT),
    *(Column(key, (key,), "summary", link="pass",
             doc=f"per user, the mean recovery score of the user's {key} targets") for key in CATEGORIES),
    Column("overall", ("overall",), "summary", link="pass", doc="B: per user, the mean of the five category means"),
)

# Table 4: the attribution label counts of each attributed pass, and the recovery rates they give.
TABLE4_SHORT = {"ok": "Recovered", "memory_failure": "Memory", "task_design_failure": "Task",
                "agent_elicitation_failure": "Agent", "simulator_too_strict": "User", "no_targeted_task": "No task",
                "unclassified": "Unclassified", "overflow": "Overflow"}
LABEL_DOCS = {
    "ok": f"targets recovered (score at least {RUBRIC.recovered:g})",
    "memory_failure": "the user disclosed the value (stage 1), and the memory lost it or could not surface it",
    "task_design_failure": "the target's task could never have drawn the value out (stage 0)",
    "agent_elicitation_failure": "not disclosed: the assistant never steered toward the topic (stage 2)",
    "simulator_too_strict": "not disclosed: the topic came up, the simulated user did not elaborate (stage 2)",
    "no_targeted_task": "no task of the user targets the dimension",
    "unclassified": "a stage's answer stayed invalid: no label is guessed",
    "overflow": "the memory read did not fit the reader's context window",
}
TABLE4 = (
    RUN,
    SYSTEM,
    MODE,
    # md, latex, the demo and the report head the counts alike; json and csv keep the labels as keys.
    *(Column(TABLE4_SHORT[label], (label,), link="label", doc=LABEL_DOCS[label]) for label in ATTRIBUTION_LABELS),
    Column("recovery rate", ("recovery_rate",),
           doc="Recovered / (Recovered + Memory): of the targets the user disclosed, the share the memory gave back"),
    # The rate the published code would report: overflow targets counted as the stages label them
    # (json carries every count as published: `published_equivalent`; a map, so not in csv).
    Column("rate as published", ("published_equivalent.recovery_rate",), outputs=OUTPUTS - {"csv"},
           doc="the recovery rate with every overflow target labelled by the stages, as the published code did"),
)


def _quantile(p: int, of: str) -> str:
    return (f"the {p}th percentile over users of {of} in the final memory (the lower order statistic: the "
            f"⌈{p / 100:g}·n⌉-th smallest)")


WRITE_FAILURES = Column("write failures", ("memory_write_failures",), link="run",
                        doc="memory writes lost because a model answer could not be used, over all users (n/a: the "
                            "system writes without a model, or an imported run)")

# Footprint quantiles over users (the lower order statistic).
FOOTPRINT = (
    RUN,
    SYSTEM,
    USERS,
    Column("items p50", ("items_p50",), digits=0, doc=_quantile(50, "the items")),
    Column("items p90", ("items_p90",), digits=0, doc=_quantile(90, "the items")),
    Column("chars p50", ("chars_p50",), digits=1, doc=_quantile(50, "the mean characters per item")),
    Column("chars p90", ("chars_p90",), digits=1, doc=_quantile(90, "the mean characters per item")),
    # What the memory system cost at rollout (issue 32), start-up apart and with sample counts (issue 44).
    Column("write s/episode p50/p95", ("write_p50", "write_p95"), digits=3, measured=True,
           doc="the wall time of an episode's memory writes in seconds, median and 95th percentile over the episodes "
               "no call cache answered and no start-up fell in, timed on the machine that ran the rollout"),
    Column("episodes timed", ("writes_timed",), measured=True, doc="the episodes those write figures are over"),
    Column("search s p50/p95", ("search_p50", "search_p95"), digits=3, measured=True,
           doc="the wall time of one memory read of the assistant in seconds, median and 95th percentile over the "
               "reads no call cache answered, but the first of each opened system (its start-up, apart)"),
    Column("reads timed", ("searches_timed",), measured=True, doc="the reads those search figures are over"),
    Column("start-up s p50/max", ("startup_p50", "startup_max"), digits=3, extra=("startups_timed",), measured=True,
           doc="the first memory operation after the system was opened for a user, which also paid its one-time "
               "start-up (a model loaded, a worker started), in seconds: median and maximum over the users "
               "(`startups_timed` of them in json)"),
    Column("timed", ("timed",), "text", measured=True,
           doc="how these wall times were measured: `alone` (rollout --time-alone: one system and user at a time, "
               "figures to compare across systems), `with others` (beside the rollout's other systems and users, "
               "sharing the machine: not comparable across systems) or `mixed`"),
    Column("memory calls/user", ("memory_calls",), digits=1,
           doc="the model calls the memory system made for a user's episodes, mean over users"),
    Column("memory tokens/user", ("memory_tokens",), digits=0,
           doc="the prompt and completion tokens of those calls, mean over users"),
    WRITE_FAILURES,
)


def measured_keys(columns) -> frozenset[str]:
    """The row keys of the columns that hold machine measurements (replay leaves them out)."""
    return frozenset(key for column in columns if column.measured for key in column.data_keys())

# The per-user gap B(dump_all) − B(retrieve); json carries each user's gap.
GAP = (
    RUN,
    SYSTEM,
    USERS,
    *(Column(key, (key,), doc=f"the {key} over users of B(dump_all) − B(retrieve), over the users scored in both "
                               "modes") for key in ("mean", "median", "min", "max")),
    Column("per user", ("per_user",), outputs=DATA, doc="each user's B(dump_all) − B(retrieve)"),
)

# Token usage per role group. Reasoning tokens are part of the completion tokens (as the API counts
# them), not added to the total.
TOKENS = (
    RUN,
    SYSTEM,
    Column("role", ("role",), "text", doc="the role group whose calls the row counts; `all`: the run's total"),
    Column("calls", ("calls",), doc="calls the run used (a cached call counted once)"),
    Column("prompt", ("prompt_tokens",), doc="prompt tokens"),
    Column("completion", ("completion_tokens",), doc="completion tokens, reasoning tokens included"),
    Column("of which reasoning", ("reasoning_tokens",), doc="reasoning tokens a reasoning model spent"),
    Column("cached", ("cached_tokens",), doc="prompt tokens the server reported as served from its prompt cache"),
    Column("total", ("total_tokens",), doc="prompt + completion tokens"),
)

# Paired comparisons of per-user B; the last column marks a Holm-adjusted p under 0.05.
COMPARISONS = (
    Column("mode", ("mode",), "text",
           doc="the access mode both runs are compared in; `dump_all-retrieve`: one run's two modes"),
    Column("run a", ("a",), "text", doc="the first run of the pair"),
    Column("run b", ("b",), "text", doc="the second run of the pair (the same run for `dump_all-retrieve`)"),
    replace(USERS, doc="the users both runs scored: the pairs of the comparison"),
    Column("diff (a − b)", ("diff",), doc="the mean over those users of B(a) − B(b)"),
    Column("95% CI", ("ci95",), "ci", doc="the 95% paired user-bootstrap interval of that mean"),
    Column("p", ("p",), digits=4, doc="the two-sided p-value of a sign-flip permutation test of the per-user "
                                      "differences"),
    Column("p Holm", ("p_holm",), digits=4,
           doc="p after Holm's step-down adjustment within its family (one per mode; one for the dump_all-retrieve "
               "gaps); `p_holm` in json and csv"),
    Column("Holm-significant", ("significant",), "mark", doc="* when p Holm is under 0.05"),
)

# Which prompt directory (name, hash) each number of a run was made with.
PROMPTS = (
    RUN,
    Column("stage", ("stage",), "text",
           doc="what the prompts made: the rollout (A, C, D, memory), a scoring pass (B) or an attribution pass "
               "(Table 4)"),
    replace(MODE, link=None, blank=""),
    Column("prompts", ("prompts",), "text",
           doc="the prompt directory: `bundled`, a directory given with --prompts, or `as released`"),
    Column("hash", ("hash",), "hash", doc="the sha256 over the prompt files used (its first characters)"),
)

def shown(columns, output: str) -> list[Column]:
    return [c for c in columns if output in c.outputs]


def legend(columns, output: str = "md") -> list[tuple[str, str]]:
    """(header, meaning) of every column the output shows, but the shared ones (COMMON: told once,
    in `common_legend`)."""
    common = {c.doc for c in COMMON}
    return [(header(c, output == "html"), c.doc) for c in shown(columns, output) if c.doc and c.doc not in common]


def common_legend(output: str = "md") -> list[tuple[str, str]]:
    """The shared columns the output shows and how a summary cell reads: said once above the tables."""
    return [(header(c, output == "html"), c.doc) for c in COMMON if output in c.outputs] + [("mean ± std [low, high]",
                                                                                  SUMMARY_CELL)]


def header(column: Column, short: bool = False) -> str:
    """A column's header; `short`: the narrower one where it has one (the report, the demo's tables)."""
    return column.short if short and column.short is not None else column.header


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
        return row["run"] + (" (partial)" if row.get("partial") else "") + teacher_forced_mark(row) + ingest_mark(row)
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


def ingest_mark(row: dict) -> str:
    """After a run id: what its deployed library was given, unless the published study's default."""
    return f" (ingest: {row['ingest']})" if row.get("ingest", USER_INGEST) != USER_INGEST else ""


def teacher_forced_mark(row: dict) -> str:
    """After a run id: its memory was fed another run's transcripts, whose A, C and D these are."""
    return f" (teacher-forced on {row['source_run']})" if row.get("teacher_forced") else ""


# The kinds whose cell reads the same in every output: the text of the column's one value.
KIND_TEXT = {"kinds": lambda found: ", ".join(f"{kind} {n}" for kind, n in found.items()) or "none",
             "yesno": num, "ci": ci_text, "versus": versus_text, "verdicts": verdicts_text, "human": human_text,
             "mark": lambda found: "*" if found else "", "hash": lambda found: (found or "")[:19]}
