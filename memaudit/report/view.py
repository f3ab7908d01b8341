"""`memaudit view`: a static HTML report that makes the audit auditable.

Page tree (every page small; a 50-user × 5-system release gives a few thousand files):

    index.html                              Tables 2/3/4, footprint, gap, tokens, charts, users
    runs/<run>.html                         per-user A, C, D, footprint, B per pass
    runs/<run>/<pass>.html                  per-user B per category, attribution counts
    runs/<run>/<pass>/<label>.html          the targets behind one Table 4 count (or overflow/failed)
    runs/<run>/episodes/<user>.html         that user's episodes in this run
    runs/<run>/memory/<user>.html           that user's final memory store
    users/<bench>/<user>.html               every bank entry × every run and pass
    users/<bench>/<user>/<dimension>.html   one target: task, transcripts, evidence, prediction,
                                            judge, attribution stages

Every Table 2/3/4 cell links one level down, and each level links further down to the target
page, whose transcript turns carry anchors. The report reads the store only; it never calls a
model. Output is deterministic: sorted iteration, no timestamps.
"""
from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from memaudit.ids import inside, refuse_links_out
from memaudit.report import data, evolving, utilization
from memaudit.report.data import Pass, Summary
from memaudit.report.html import (LABEL_COLOURS, bar_chart, dl, esc, href, link, mean_std, num, page,
                                  score_class, slug, stacked_chart, table)
from memaudit.scoring.tables import compute_tables, models_text
from memaudit.store import RunConfig, Store, dumps
from memaudit.types import ATTRIBUTION_LABELS, CATEGORIES

INDEX = "index.html"
LABEL_MARKS = {"ok": "", "memory_failure": "M", "task_design_failure": "T", "agent_elicitation_failure": "A",
               "simulator_too_strict": "U", "no_targeted_task": "N", "unclassified": "?", "overflow": "O"}
TABLE4_HEADERS = {"ok": "Recovered", "memory_failure": "Memory", "task_design_failure": "Task",
                  "agent_elicitation_failure": "Agent", "simulator_too_strict": "User", "no_targeted_task": "No task",
                  "unclassified": "Unclassified", "overflow": "Overflow"}
MODE_COLOURS = {"dump_all": "#1f5f8b", "retrieve": "#e07a2f"}


async def write_report(store: Store, out_dir, runs: list[str] | None = None) -> Path:
    """Write the report for `runs` (default: every run in the store) into out_dir; returns index.html."""
    out = Path(out_dir)
    selected = await data.report_runs(store, runs)
    summary = await data.load_summary(store, selected)
    tables = await compute_tables(store, [r["run"] for r in selected])
    refuse_links_out(out)
    writer = _Writer(out)
    writer.copy_assets()
    writer.write(INDEX, _index_page(summary, tables))
    for run in summary.runs:
        writer.write(_run_page(run["run"]), _run_overview(summary, run))
        for p in summary.run_passes(run["run"]):
            lists = _target_lists(summary, p)
            writer.write(_pass_page(p), _pass_overview(summary, run, p, lists))
            for name, targets in lists.items():
                writer.write(_list_page(p, name), _target_list(summary, run, p, name, targets))
    await utilization.write_pages(store, writer, tables)
    for bench, users in summary.users.items():
        bench_runs = [r for r in summary.runs if r["bench"] == bench]
        for user in users:
            if not any(user["user_id"] in summary.run_users(r) for r in bench_runs):
                continue
            await _write_user(store, writer, summary, bench, bench_runs, user)
    writer.remove_stale()
    return out / INDEX


class _Writer:
    """Writes pages under the report root and remembers them, so pages left over from an earlier
    report into the same directory (other runs, other users) can be removed."""

    def __init__(self, root: Path):
        self.root = root
        self.written: set[Path] = set()

    def copy_assets(self) -> None:
        target = self.root / "assets"
        target.mkdir(parents=True, exist_ok=True)
        source = resources.files("memaudit.report") / "assets"
        for item in sorted(source.iterdir(), key=lambda i: i.name):
            if item.is_file():
                inside(self.root, target / item.name).write_bytes(item.read_bytes())

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        inside(self.root, path, label=rel).write_text(text, encoding="utf-8")
        self.written.add(path)

    def remove_stale(self) -> None:
        for tree in ("runs", "users"):
            for path in sorted((self.root / tree).rglob("*.html")):
                if path not in self.written:
                    path.unlink()


# -- page paths --------------------------------------------------------------------------------
def _run_page(run: str) -> str:
    return f"runs/{slug(run)}.html"


def _pass_page(p: Pass) -> str:
    return f"runs/{slug(p.run)}/{p.slug}.html"


def _list_page(p: Pass, name: str) -> str:
    return f"runs/{slug(p.run)}/{p.slug}/{slug(name)}.html"


def _episodes_page(run: str, user: str) -> str:
    return f"runs/{slug(run)}/episodes/{slug(user)}.html"


def _memory_page(run: str, user: str) -> str:
    return f"runs/{slug(run)}/memory/{slug(user)}.html"


def _user_page(bench: str, user: str) -> str:
    return f"users/{slug(bench)}/{slug(user)}.html"


def _target_page(bench: str, user: str, dimension: str) -> str:
    return f"users/{slug(bench)}/{slug(user)}/{slug(dimension)}.html"


def _pass_anchor(p: Pass) -> str:
    return f"{slug(p.run)}-{p.slug}"


def _episode_anchor(run: str, task_idx: int) -> str:
    return f"{slug(run)}-e{task_idx}"


def _turn_anchor(run: str, task_idx: int, turn: int) -> str:
    return f"{_episode_anchor(run, task_idx)}-t{turn}"


# -- index -------------------------------------------------------------------------------------
def _index_page(summary: Summary, tables: dict) -> str:
    runs = {r["run"]: r for r in summary.runs}
    parts = [_runs_section(summary)]
    parts.append(_table2(summary, tables.get("table2") or [], runs))
    parts.append(_table3(summary, tables.get("table3") or []))
    parts.append(_table4(summary, tables.get("table4") or []))
    for key, title in (("footprint", "Footprint distribution"), ("gap", "Per-user dump − retrieve gap"),
                       ("tokens", "Token usage"), ("comparisons", "Paired comparisons of per-user B")):
        parts.append(f"<h2>{esc(title)}</h2>" + _generic_table(summary, tables.get(key) or []))
    parts.append(utilization.index_sections(tables))
    if tables.get("evolving"):
        parts.append(evolving.index_section(tables))
    parts.append(_users_section(summary))
    return page(INDEX, "memaudit audit report", "\n".join(parts))


def _runs_section(summary: Summary) -> str:
    rows = []
    for r in summary.runs:
        cfg = r["config"] or {}
        rows.append([link(INDEX, _run_page(r["run"]), esc(r["run"])), esc(r["system"]), esc(r["bench"]),
                     esc(r["origin"]), f'<td class="n">{len(summary.run_users(r))}</td>',
                     esc(", ".join(f"{k}={cfg[k]}" for k in ("tasks", "max_turns", "k", "tag") if cfg.get(k) is not None))])
    return ("<h2>Runs</h2>" + table(["run", "system", "benchmark", "origin", "users", "config"], rows)
            + '<p class="note">Every number below links to the rows it was computed from; follow the links '
              "down to a single target and the transcript turns that did or did not reveal it.</p>")


def _partial(row: dict) -> str:
    flag = row.get("partial")
    return ' <span class="badge partial">partial</span>' if flag else ""


def _teacher_forced(row: dict) -> str:
    if not row.get("teacher_forced"):
        return ""
    source = esc(row["source_run"])
    return (f' <span class="badge teacher-forced" title="memory was fed the recorded episodes of {source}: '
            f'A, C and D are the source run&#39;s">teacher-forced on {source}</span>')


def _table2(summary: Summary, rows: list[dict], runs: dict) -> str:
    body, charts = [], []
    for row in rows:
        known = row["run"] in runs
        to_run = (lambda text: link(INDEX, _run_page(row["run"]), text)) if known else (lambda text: text)
        cells = [to_run(esc(row["run"])) + _partial(row) + _teacher_forced(row), esc(row.get("system")),
                 to_run(str(row.get("users", "—"))), to_run(num(row.get("A"), 1)), to_run(num(row.get("D"), 2)),
                 to_run(num(row.get("C"), 2))]
        bars = []
        for mode in ("dump_all", "retrieve"):
            p = summary.find_pass(row["run"], mode, row.get("retrieve_k"))
            text = mean_std(row.get(f"B_{mode}"), row.get(f"B_{mode}_std"))
            ci = row.get(f"B_{mode}_ci95")
            if ci:
                text = f'<span title="95% bootstrap interval over users: {_value(ci)}">{text}</span>'
            cells.append(link(INDEX, _pass_page(p), text) if p else text)
            bars.append((mode, row.get(f"B_{mode}"), row.get(f"B_{mode}_std")))
        cells += [to_run(num(row.get("items"), 1)), to_run(num(row.get("chars"), 1))]
        for mode in ("dump_all", "retrieve"):
            p = summary.find_pass(row["run"], mode, row.get("retrieve_k"))
            count = row.get(f"overflow_{mode}")
            text = "—" if count is None else str(count)
            cells.append(link(INDEX, _list_page(p, "status-overflow"), text) if p and count else text)
        lost = row.get("memory_write_failures")
        cells.append(to_run("—" if lost is None else str(lost)))
        body.append([f'<td class="n">{c}</td>' if i > 1 else c for i, c in enumerate(cells)]
                    + [esc(models_text(row.get("models") or {}))])
        charts.append((row["run"], bars))
    headers = ["run", "system", "users", "A (%)", "D (/5)", "C", "B full-store", "B top-k", "items", "chars/item",
               "overflow full", "overflow top-k", "memory write failures", "models"]
    return ("<h2>Table 2 · task completion, preference, turns, recovery, footprint</h2>"
            + table(headers, body)
            + bar_chart("Recovery B by system and access mode (mean ± std over users)", charts, MODE_COLOURS))


def _run_mode_cells(row: dict, p: Pass | None) -> list[str]:
    """The first cells of a Table 3/4 row: run (to its page), system, mode (to the pass page)."""
    mode = esc(_mode_name(row))
    return [link(INDEX, _run_page(row["run"]), esc(row["run"])) + _partial(row), esc(row.get("system")),
            link(INDEX, _pass_page(p), mode) if p else mode]


def _mode_name(row: dict) -> str:
    return f"{row['mode']} k={row['k']}" if row.get("k") else row["mode"]


def _table3(summary: Summary, rows: list[dict]) -> str:
    body = []
    for row in rows:
        p = summary.find_pass(row["run"], row["mode"], row.get("k"))
        cells = _run_mode_cells(row, p)
        for key in (*CATEGORIES, "overall"):
            text = mean_std(row.get(key), row.get(f"{key}_std"))
            cells.append(f'<td class="n">{link(INDEX, _pass_page(p), text) if p else text}</td>')
        body.append(cells)
    return ("<h2>Table 3 · recovery per category</h2>"
            + table(["run", "system", "mode", *CATEGORIES, "overall"], body))


def _table4(summary: Summary, rows: list[dict]) -> str:
    body, stacks = [], []
    for row in rows:
        p = summary.find_pass(row["run"], row["mode"], row.get("k"))
        cells = _run_mode_cells(row, p)
        for label in ATTRIBUTION_LABELS:
            count = row.get(label)
            text = "—" if count is None else str(count)
            cells.append(f'<td class="n">{link(INDEX, _list_page(p, label), text) if p and count else text}</td>')
        cells.append(f'<td class="n">{num(row.get("recovery_rate"))}</td>')
        body.append(cells)
        if any(row.get(lb) for lb in ATTRIBUTION_LABELS):
            stacks.append((f"{row['run']} · {_mode_name(row)}", {lb: row[lb] for lb in ATTRIBUTION_LABELS}))
    legend = ", ".join(f"{short} = {label}" for label, short in TABLE4_HEADERS.items())
    return ("<h2>Table 4 · failure attribution</h2>"
            + table(["run", "system", "mode", *TABLE4_HEADERS.values(), "recovery rate"], body)
            + f'<p class="note">{esc(legend)}; recovery rate = Recovered / (Recovered + Memory).</p>'
            + (stacked_chart("Attribution of every target", stacks, LABEL_COLOURS) if stacks else ""))


def _generic_table(summary: Summary, rows: list[dict]) -> str:
    """A table of any list of flat rows; nested per-user breakdowns are left to the drill-down pages."""
    if not rows:
        return '<p class="muted">nothing recorded</p>'
    lead = ("run", "system", "mode", "role", "a", "b")
    keys = sorted({k for row in rows for k, v in row.items() if not isinstance(v, dict)},
                  key=lambda k: (lead.index(k) if k in lead else len(lead), k))
    runs = {r["run"] for r in summary.runs}

    def cell(key: str, value) -> str:
        if key == "run" and value in runs:
            return link(INDEX, _run_page(value), esc(value))
        if isinstance(value, (int, float, list)) and not isinstance(value, bool) or value is None:
            return f'<td class="n">{_value(value)}</td>'
        return esc(value)

    return table(keys, [[cell(k, row.get(k)) for k in keys] for row in rows])


def _value(value) -> str:
    if isinstance(value, float):
        return num(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return "—" if value is None else esc(value)


def _users_section(summary: Summary) -> str:
    parts = ["<h2>Users</h2>"]
    for bench, users in summary.users.items():
        bench_runs = [r for r in summary.runs if r["bench"] == bench]
        shown = [u for u in users if any(u["user_id"] in summary.run_users(r) for r in bench_runs)]
        items = "".join(f"<li>{link(INDEX, _user_page(bench, u['user_id']), esc(u['user_id']))}</li>" for u in shown)
        parts.append(f"<h3>benchmark {esc(bench)}</h3><ul class=\"links\">{items}</ul>")
    return "".join(parts)


# -- run and pass pages ------------------------------------------------------------------------
def _run_overview(summary: Summary, run: dict) -> str:
    path = _run_page(run["run"])
    passes = summary.run_passes(run["run"])
    rows = []
    for user in summary.run_users(run):
        m = summary.metrics[run["run"]].get(user)
        episodes = _episodes_page(run["run"], user)
        row = [link(path, _user_page(run["bench"], user), esc(user)),
               link(path, episodes, f"{m.episodes if m else 0} episodes")]
        row += [link(path, episodes, text) for text in
                (num(m.A * 100 if m else None, 1), num(m and m.C, 2), num(m and m.D, 2))]
        row += [link(path, _memory_page(run["run"], user), num(m and m.items, 0)), num(m and m.chars, 1),
                num(m and m.memory_write_failures, 0)]
        for p in passes:
            row.append(link(path, _user_page(run["bench"], user), num(_recovery(summary, p, user)),
                            anchor=_pass_anchor(p)))
        rows.append([c if i < 2 else f'<td class="n">{c}</td>' for i, c in enumerate(row)])
    source = RunConfig.from_json(run["config"]).transcripts
    transcripts = []
    if source:
        shown = link(path, _run_page(source), esc(source)) if any(r["run"] == source for r in summary.runs) \
            else esc(source)
        transcripts = [("transcripts", f"teacher-forced: memory was fed the recorded episodes of {shown}, "
                                       "whose A, C and D these are")]
    cfg = dl([("system", esc(run["system"])), ("benchmark", esc(run["bench"])), ("origin", esc(run["origin"])),
              *transcripts, ("config", f"<code>{esc(dumps(run['config']))}</code>")])
    pass_links = " · ".join(link(path, _pass_page(p), esc(p.name)) for p in passes) or "not scored"
    headers = ["user", "episodes", "A (%)", "C", "D (/5)", "items", "chars/item", "memory write failures",
               *[f"B {p.name}" for p in passes]]
    return page(path, f"run {run['run']}",
                cfg + f"<p>scoring passes: {pass_links}</p><h2>Per user</h2>" + table(headers, rows)
                + '<p class="note">A = satisfied episodes / all; C = mean assistant replies per episode; D = mean of '
                  "scorable turn preference scores; items/chars from the final memory snapshot; memory write "
                  "failures = memory-side calls that failed for good, so that write was lost; B category-balanced, "
                  "overflow counted as 0, failed left out.</p>",
                [(INDEX, "report")])


def _pass_overview(summary: Summary, run: dict, p: Pass, lists: dict[str, list]) -> str:
    path = _pass_page(p)
    rows = []
    for user in summary.run_users(run):
        grid = _user_page(run["bench"], user)
        cells = [link(path, grid, esc(user), anchor=_pass_anchor(p))]
        for category in CATEGORIES:
            value = _recovery(summary, p, user, category)
            cells.append(f'<td class="n {score_class(value)}">{link(path, grid, num(value), anchor=category)}</td>')
        statuses = [r["status"] for r in summary.scores[p].get(user, {}).values()]
        cells.append(f'<td class="n">{link(path, grid, num(_recovery(summary, p, user)), anchor=_pass_anchor(p))}</td>')
        cells += [f'<td class="n">{statuses.count(s)}</td>' for s in ("ok", "overflow", "failed")]
        rows.append(cells)
    list_links = " · ".join(f"{link(path, _list_page(p, name), esc(name))} ({len(targets)})"
                            for name, targets in lists.items())
    headers = ["user", *CATEGORIES, "B", "judged", "overflow", "failed"]
    return page(path, f"{run['run']} · {p.name}",
                f"<p>targets by attribution label or status: {list_links or 'none'}</p>"
                + "<h2>Per user and category</h2>" + table(headers, rows),
                [(INDEX, "report"), (_run_page(run["run"]), run["run"])])


def _target_lists(summary: Summary, p: Pass) -> dict[str, list[tuple[str, str]]]:
    """Targets (user, dimension) per attribution label, plus those whose reconstruction overflowed or failed."""
    lists: dict[str, list[tuple[str, str]]] = {}
    for user, labels in sorted(summary.labels[p].items()):
        for dimension, label in sorted(labels.items()):
            lists.setdefault(label, []).append((user, dimension))
    for user, scored in sorted(summary.scores[p].items()):
        for dimension, row in sorted(scored.items()):
            if row["status"] in ("overflow", "failed"):
                lists.setdefault(f"status-{row['status']}", []).append((user, dimension))
    order = [*ATTRIBUTION_LABELS, "status-overflow", "status-failed"]
    return {name: lists[name] for name in sorted(lists, key=lambda n: (order.index(n) if n in order else 99, n))}


def _target_list(summary: Summary, run: dict, p: Pass, name: str, targets: list[tuple[str, str]]) -> str:
    path = _list_page(p, name)
    rows = []
    for user, dimension in targets:
        row = summary.scores[p].get(user, {}).get(dimension, {})
        rows.append([link(path, _user_page(run["bench"], user), esc(user)), esc(row.get("category", "")),
                     link(path, _target_page(run["bench"], user, dimension), esc(dimension), anchor=_pass_anchor(p)),
                     f'<td class="n {score_class(row.get("score"))}">{num(row.get("score"), 2)}</td>',
                     esc(row.get("status", "")), esc(row.get("label", ""))])
    return page(path, f"{run['run']} · {p.name} · {name}",
                f"<p>{len(targets)} targets.</p>"
                + table(["user", "category", "dimension", "score", "status", "prediction"], rows),
                [(INDEX, "report"), (_run_page(run["run"]), run["run"]), (_pass_page(p), p.name)])


# -- user pages --------------------------------------------------------------------------------
async def _write_user(store: Store, writer: _Writer, summary: Summary, bench: str, runs: list[dict],
                      user: dict) -> None:
    uid = user["user_id"]
    runs = [r for r in runs if uid in summary.run_users(r)]
    detail = await data.load_user_detail(store, [r["run"] for r in runs], uid)
    writer.write(_user_page(bench, uid), _user_grid(summary, bench, runs, user))
    for run in runs:
        writer.write(_episodes_page(run["run"], uid), _episode_list(bench, run, user, detail))
        snapshot = await store.last_snapshot(run["run"], uid)
        writer.write(_memory_page(run["run"], uid), _memory_store(bench, run, uid, snapshot))
    tasks_by_dim: dict[str, list[dict]] = {}
    for task in user["tasks"]:
        tasks_by_dim.setdefault(task["target_dimension"], []).append(task)
    entries = {e["dimension"]: e for e in user["bank"]}

    def episode_href(run: str, task_idx: int, turn: int, dimension: str) -> str:
        return href(_target_page(bench, uid, dimension), _episodes_page(run, uid), _turn_anchor(run, task_idx, turn))
    history = await evolving.target_sections(store, bench, uid, [r["run"] for r in runs], episode_href)
    for dimension in sorted(set(entries) | set(tasks_by_dim)):
        writer.write(_target_page(bench, uid, dimension),
                     _target(summary, bench, runs, user, entries.get(dimension), dimension,
                             tasks_by_dim.get(dimension, []), detail, history.get(dimension, "")))


def _grid_cell(path: str, bench: str, uid: str, p: Pass, dimension: str, row: dict | None,
               label: str | None) -> str:
    if row is None:
        return '<td class="cell snone">—</td>'
    status = row["status"]
    if status == "overflow":
        cls, text = "ovf", "overflow"
    elif status == "failed":
        cls, text = "fail", "failed"
    else:
        cls, text = score_class(row["score"]), num(row["score"], 2)
    mark = LABEL_MARKS.get(label or "", label or "")
    text += f'<span class="mark">{esc(mark)}</span>' if mark else ""
    title = f' title="{esc(label)}"' if label else ""
    return (f'<td class="cell {cls}"{title}>'
            f'{link(path, _target_page(bench, uid, dimension), text, anchor=_pass_anchor(p))}</td>')


def _user_grid(summary: Summary, bench: str, runs: list[dict], user: dict) -> str:
    uid = user["user_id"]
    path = _user_page(bench, uid)
    passes = [p for r in runs for p in summary.run_passes(r["run"])]
    rows = []
    for category in CATEGORIES:
        means = [_recovery(summary, p, uid, category) for p in passes]
        rows.append([f'<td colspan="2" class="group" id="{category}">{esc(category)}</td>']
                    + [f'<td class="cell group">{num(m)}</td>' for m in means])
        for entry in (e for e in user["bank"] if e["category"] == category):
            dim = entry["dimension"]
            cells = [link(path, _target_page(bench, uid, dim), esc(dim)), esc(entry["short"])]
            cells += [_grid_cell(path, bench, uid, p, dim, summary.scores[p].get(uid, {}).get(dim),
                                 summary.labels[p].get(uid, {}).get(dim)) for p in passes]
            rows.append(cells)
    rows.append(['<td colspan="2" class="group">B (category-balanced)</td>'] + [
        f'<td class="cell group" id="{_pass_anchor(p)}">{num(_recovery(summary, p, uid))}</td>' for p in passes])
    headers = ["dimension", "ground truth", *[f"{p.run} · {p.name}" for p in passes]]
    legend = ", ".join(f"{m} = {lb}" for lb, m in LABEL_MARKS.items() if m)
    episode_links = " · ".join(link(path, _episodes_page(r["run"], uid), esc(r["run"])) for r in runs)
    return page(path, f"user {uid}",
                _persona(user["persona"]) + f"<p>episodes per run: {episode_links}</p>"
                + "<h2>Bank entries across systems and access modes</h2>" + table(headers, rows, "grid")
                + f'<p class="note">Cells: judge score (colour by rubric level), striped = overflow, dark = failed; '
                  f"letter = attribution label ({esc(legend)}). Each cell opens the target's page.</p>",
                [(INDEX, "report")])


def _recovery(summary: Summary, p: Pass, uid: str, category: str | None = None) -> float | None:
    """A user's B in a pass, or the mean of one category."""
    rec = summary.recovery[p].get(uid)
    if rec is None:
        return None
    return rec.B if category is None else rec.categories.get(category)


def _persona(persona) -> str:
    if not isinstance(persona, dict) or not persona:
        return ""
    pairs = [(str(k), esc(v if isinstance(v, str) else dumps(v))) for k, v in sorted(persona.items())]
    return f"<details><summary>persona</summary>{dl(pairs)}</details>"


def _episode_list(bench: str, run: dict, user: dict, detail: dict) -> str:
    uid = user["user_id"]
    path = _episodes_page(run["run"], uid)
    tasks = {t["idx"]: t for t in user["tasks"]}
    rows = []
    for (run_name, idx), ep in sorted(detail["episodes"].items()):
        if run_name != run["run"]:
            continue
        task = tasks.get(idx)
        scores = [t["preference_score"] for t in ep["turns"] if t["preference_score"] is not None]
        target = (link(path, _target_page(bench, uid, task["target_dimension"]), esc(task["target_dimension"]),
                       anchor=_episode_anchor(run["run"], idx)) if task else "—")
        rows.append([f'<td class="n">{idx}</td>', esc(ep["task"]), target, esc(ep["end_reason"]),
                     f'<td class="n">{ep["n_turns"]}</td>',
                     f'<td class="n">{num(sum(scores) / len(scores), 2) if scores else "—"}</td>'])
    return page(path, f"{run['run']} · {uid} · episodes",
                table(["#", "task", "target (opens the transcript)", "end", "turns", "mean preference"], rows),
                [(INDEX, "report"), (_run_page(run["run"]), run["run"]), (_user_page(bench, uid), uid)])


def _memory_store(bench: str, run: dict, uid: str, snapshot: dict | None) -> str:
    path = _memory_page(run["run"], uid)
    if snapshot is None:
        body = '<p class="muted">no memory snapshot recorded</p>'
    else:
        items = "".join(f"<li>{_item(item)}</li>" for item in snapshot["items"])
        body = (f"<p>{snapshot['n_items']} items, {num(snapshot['avg_chars'], 1)} chars/item, after task "
                f"{snapshot['task_idx']}.</p><ol class=\"items\">{items}</ol>")
    return page(path, f"{run['run']} · {uid} · final memory", body,
                [(INDEX, "report"), (_run_page(run["run"]), run["run"]), (_user_page(bench, uid), uid)])


def _item(item) -> str:
    if not isinstance(item, dict):
        return esc(dumps(item))
    rest = {k: v for k, v in item.items() if k != "content"}
    fields = f'<div class="muted">{esc(dumps(rest))}</div>' if rest else ""
    return f"{esc(item.get('content', ''))}{fields}"


# -- target page -------------------------------------------------------------------------------
def _target(summary: Summary, bench: str, runs: list[dict], user: dict, entry: dict | None, dimension: str,
            tasks: list[dict], detail: dict, history: str = "") -> str:
    """`history`: the section of an evolving entry (report/evolving.py); empty for a static one."""
    uid = user["user_id"]
    path = _target_page(bench, uid, dimension)
    head = [("dimension", esc(dimension))]
    if entry:
        head += [("category", esc(entry["category"])), ("ground truth", f"<b>{esc(entry['short'])}</b>"),
                 ("explanation", esc(entry["explanation"]))]
    else:
        head.append(("bank", '<span class="muted">not in this user\'s bank</span>'))
    for task in tasks:
        head.append((f"task {task['idx']}", esc(task["text"])))
        if task["rationale"]:
            head.append(("rationale", esc(task["rationale"])))
    if not tasks:
        head.append(("task", '<span class="muted">no task targets this dimension</span>'))
    parts = [f'<div class="card">{dl(head)}</div>', *([history] if history else []),
             _target_summary(path, runs, summary, uid, dimension)]
    recons = detail["recons"].get(dimension, [])
    for run in runs:
        parts.append(f'<h2 id="{slug(run["run"])}">{esc(run["run"])} <span class="muted">({esc(run["system"])})'
                     "</span></h2>")
        citations = []
        for r in (r for r in recons if r["run"] == run["run"]):
            p = Pass(r["run"], r["mode"], r["k"])
            attribution = detail["attributions"].get((r["run"], r["mode"], r["k"], dimension))
            parts.append(_reconstruction(path, run, uid, p, r, attribution))
            citations += _citations(attribution)
        for task in tasks:
            episode = detail["episodes"].get((run["run"], task["idx"]))
            parts.append(_transcript(run["run"], task, episode, citations))
    return page(path, f"{uid} · {dimension}", "\n".join(parts),
                [(INDEX, "report"), (_user_page(bench, uid), uid)])


def _target_summary(path: str, runs: list[dict], summary: Summary, uid: str, dimension: str) -> str:
    rows = []
    for run in runs:
        for p in summary.run_passes(run["run"]):
            row = summary.scores[p].get(uid, {}).get(dimension)
            if row is None:
                continue
            label = summary.labels[p].get(uid, {}).get(dimension)
            rows.append([link(path, _run_page(run["run"]), esc(run["run"])),
                         link(path, path, esc(p.name), anchor=_pass_anchor(p)),
                         f'<td class="n {score_class(row["score"])}">{num(row["score"], 2)}</td>',
                         esc(row["status"]), esc(row["label"]), esc(label or "")])
    if not rows:
        return '<p class="muted">not scored in any selected run</p>'
    return table(["run", "pass", "score", "status", "prediction", "attribution"], rows)


def _reconstruction(path: str, run: dict, uid: str, p: Pass, r: dict, attribution: dict | None) -> str:
    evidence = r["evidence"] or {}
    if p.mode == "dump_all":
        memory = link(path, _memory_page(run["run"], uid), "the whole final store")
        shown = (f"{memory}: {esc(evidence.get('n_items', '?'))} items, "
                 f"{esc(evidence.get('chars', '?'))} characters")
    else:
        items = evidence.get("items") or []
        shown = (f"top-{p.k} retrieved items ({len(items)})<ol class=\"items\">"
                 + "".join(f"<li>{_item(i)}</li>" for i in items) + "</ol>") if items else "no items retrieved"
    rows = [("status", esc(r["status"]) + (f' <span class="muted">{esc(r["error"])}</span>' if r["error"] else "")),
            ("memory read", shown),
            ("prediction", f"<b>{esc(r['label'])}</b>" if r["label"] is not None else "—"),
            ("reader's reason", esc(r["reason"])),
            ("judge score", f'<span class="badge {score_class(r["score"])}">{num(r["score"], 2)}</span>'),
            ("judge's reason", esc(r["judge_reason"]))]
    if attribution:
        rows.append(("attribution", f"<b>{esc(attribution['label'])}</b>"
                     + (f" · episode {attribution['ep_index']}" if attribution["ep_index"] is not None else "")
                     + (f' <span class="muted">{esc(attribution["note"])}</span>' if attribution["note"] else "")))
        rows += [(f"stage {_stage_name(i, s)}", _stage(s)) for i, s in enumerate(attribution["stages"] or [])]
    return f'<div class="pass" id="{_pass_anchor(p)}"><h3>{esc(p.name)}</h3>{dl(rows)}</div>'


def _stage_name(position: int, stage) -> str:
    if not isinstance(stage, dict):
        return str(position)
    number, name = stage.get("stage", position), stage.get("name")
    return f"{number} · {name}" if name else str(number)


def _stage(stage) -> str:
    if not isinstance(stage, dict):
        return f"<pre>{esc(dumps(stage))}</pre>"
    return dl([(k, esc(v) if isinstance(v, str) else f"<code>{esc(dumps(v))}</code>")
               for k, v in sorted(stage.items()) if k not in ("stage", "name")])


def _citations(attribution: dict | None) -> list[tuple[str, int | None, str | None]]:
    """What each attribution stage points at in the transcript: (stage, turn number, quoted text)."""
    if not attribution:
        return []
    found = []
    for i, stage in enumerate(attribution["stages"] or []):
        name = f"{attribution['mode']} stage {_stage_name(i, stage)}"
        for key, value in _leaves(stage):
            if "turn" in key and isinstance(value, int) and not isinstance(value, bool):
                found.append((name, value, None))
            elif ("evidence" in key or "quote" in key) and isinstance(value, str) and _quote(value):
                found.append((name, None, _quote(value)))
    return found


def _quote(text: str) -> str:
    """A stage's quote as it appears in the transcript: no surrounding quote marks or speaker prefix."""
    text = text.strip().strip('"“”\'').strip()
    return re.sub(r"^(user|assistant)\s*:\s*", "", text, flags=re.IGNORECASE)


def _leaves(value, key: str = ""):
    if isinstance(value, dict):
        for k, v in sorted(value.items()):
            yield from _leaves(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v, key)
    else:
        yield key, value


def _marked(text: str | None, quotes: list[str]) -> str:
    """Escaped text with every quoted passage wrapped in <mark>."""
    text = text or ""
    lower = text.lower()
    spans = sorted((i, i + len(q)) for q in quotes if (i := lower.find(q.lower())) >= 0)
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, pos = [], 0
    for start, end in merged:
        out += [esc(text[pos:start]), f"<mark>{esc(text[start:end])}</mark>"]
        pos = end
    return "".join(out) + esc(text[pos:])


def _transcript(run: str, task: dict, episode: dict | None, citations: list) -> str:
    anchor = _episode_anchor(run, task["idx"])
    if episode is None:
        return f'<p id="{anchor}" class="muted">episode {task["idx"]}: not run in this run</p>'
    quotes = [q for _, _, q in citations if q]

    def line(turn: int, who: str, text: str | None, extra: str = "") -> str:
        lower = (text or "").lower()
        why = sorted({name for name, n, q in citations if n == turn or (q and q.lower() in lower)})
        cls = " cited" if why else ""
        note = f'<div class="muted">cited by {esc(", ".join(why))}</div>' if why else ""
        return f'<div class="who{cls}">{who}</div><div class="text{cls}">{_marked(text, quotes)}{extra}{note}</div>'

    rows = [f'<div class="turn" id="{_turn_anchor(run, task["idx"], 0)}">'
            + line(0, "task<br>user", episode["task"]) + "</div>"]
    for t in episode["turns"]:
        score = "unscorable" if t["preference_score"] is None else f"preference {num(t['preference_score'], 2)}"
        fallback = ' <span class="badge">simulator fallback</span>' if t["fallback"] else ""
        rows.append(f'<div class="turn" id="{_turn_anchor(run, task["idx"], t["turn"])}">'
                    + line(t["turn"], f"turn {t['turn']}<br>assistant", t["assistant"],
                           f'<div class="muted">{score}</div>')
                    + line(t["turn"], f'user<br><span class="badge">{esc(t["feedback_type"])}</span>',
                           t["user_text"], fallback) + "</div>")
    summary = (f"transcript of episode {task['idx']}: {esc(episode['end_reason'])}, {episode['n_turns']} turns"
               + (f" ({esc(episode['error'])})" if episode["error"] else ""))
    return f'<details open id="{anchor}"><summary>{summary}</summary>{"".join(rows)}</details>'
