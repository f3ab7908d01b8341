"""`memaudit view`: a static HTML report that makes the audit auditable.

Pages (the files grow with runs and passes; each run and pass page has one row per user):

    index.html                              Tables 2/3/4, footprint, gap, tokens, charts, users
    runs/<run>.html                         per-user A, C, D, footprint, B per pass
    runs/<run>/<pass>.html                  per-user B per category, attribution counts
    runs/<run>/<pass>/<label>.html          the targets behind one Table 4 count (or overflow/failed),
                                            as data that assets/user.js renders into a table
    user.html#f=<bench>/<user>&v=…          one user's drill-down, rendered in the browser from
    data/<bench>/<user>.js                  the user's data file (memaudit/report/userdata.py):
        v=grid                              every bank entry × every run and pass
        v=target&d=<dimension>              one target: task, transcripts, reads, prediction,
                                            judge, attribution stages, the cited transcript lines
        v=episodes&r=<run> · v=memory&r=<run>   the user's episodes and final memory in a run

Every Table 2/3/4 cell links one level down, and each level links further down to the target,
whose transcript turns carry anchors. The data files are what a report's size and time grow with
(`user_data`: all of them, none, up to userdata.AUTO_USER_RUNS user-runs, or served on demand by
report/serve.py). Other report parts add pages beside these (write_report)
and sections to the user's views (assets/user.js: MEMAUDIT.sections). The report reads the
store only; it never calls a model. Output is deterministic: sorted iteration, no timestamps.
"""
from __future__ import annotations

import functools
import posixpath
import re
from importlib import resources
from pathlib import Path

import anyio
import orjson

from memaudit.ids import inside, refuse_links_out
from memaudit.report import data, evolving, judges, userdata, utilization
from memaudit.report.columns import declared, mode_name
from memaudit.report.data import Pass, Summary
from memaudit.report.html import (INDEX, LABEL_COLOURS, STYLESHEET, count, dl, esc, href, legend_list, link, num, page,
                                  panel_chart, score_class, score_levels, slug, stacked_chart, table)
from memaudit.report.palette import run_colours
from memaudit.store import RunConfig, Store, dumps
from memaudit.tables.columns import (LABEL_DOCS, RUBRIC_TEXT, TABLE2, TABLE3, TABLE4, Column, common_legend, legend,
                                     models_text, value)
from memaudit.tables.paper import DECLARED, compute_tables
from memaudit.tables.paper_render import PREFACE, title
from memaudit.tables.stats import release_resamples
from memaudit.types import ATTRIBUTION_LABELS, CATEGORIES, MODES

# A reconstruction's status as the user's views show it: `ok` means it was judged, not that it was right.
STATUS_TEXT = {"ok": "judged", "overflow": "overflow: the memory did not fit the reader", "failed":
               "failed: no valid answer, left out of B"}
# What the target view's columns and rows mean (assets/user.js shows it under the summary).
TARGET_LEGEND = (("score", f"the recovery judge's score of the prediction against the ground truth ({RUBRIC_TEXT})"),
                 ("reconstruction", "judged, overflow (scored 0) or failed (left out of B)"),
                 ("prediction", "what the reader filled in from the memory it was shown"),
                 ("attribution", "why a target below the recovered mark was missed:"),
                 *LABEL_DOCS.items())
LABEL_MARKS = {"ok": "", "memory_failure": "M", "task_design_failure": "T", "agent_elicitation_failure": "A",
               "simulator_too_strict": "U", "no_targeted_task": "N", "unclassified": "?", "overflow": "O"}
MODE_NAMES = {"dump_all": "full-store (dump_all)", "retrieve": "top-k (retrieve)"}
USER_SCRIPT = "assets/user.js"


async def write_report(store: Store, out_dir, runs: list[str] | None = None) -> Path:
    """Write the report for `runs` (default: every run in the store) into out_dir; returns index.html."""
    return (await build_report(store, out_dir, runs)).index


async def build_report(store: Store, out_dir, runs: list[str] | None = None, *, user_data: str = "all") -> "Report":
    """The report's pages in out_dir and, as `user_data` says (userdata.USER_DATA, or "served"), the
    users' data files."""
    out = Path(out_dir)
    selected = await data.report_runs(store, runs)
    # What the tables are computed from is read once: the pages show its per-user figures.
    runs_data = await data.read_runs(store, selected)
    tables = await compute_tables(store, [r["run"] for r in selected], data=runs_data)
    release_resamples()  # the pages need no more intervals: their draws' memory goes before the pages'
    summary = await data.load_summary(store, selected, runs_data)
    paneled = await judges.paneled_runs(store, [r["run"] for r in selected])
    report = Report(out / INDEX, store, summary)
    report.data_written = user_data == "all" or (user_data == "auto" and report.user_runs <= userdata.AUTO_USER_RUNS)
    refuse_links_out(out)
    writer = _Writer(out)
    writer.copy_assets()
    writer.write(INDEX, _index_page(summary, tables, judges.index_section(tables, paneled)))
    for run in summary.runs:
        writer.write(_run_page(run["run"]), _run_overview(summary, run))
        for p in summary.run_passes(run["run"]):
            rows = await data.pass_rows(store, p)
            lists = _target_lists(rows)
            writer.write(_pass_page(p), _pass_overview(summary, run, p, rows, lists))
            for name, targets in lists.items():
                writer.write(_list_page(p, name), _target_list(rows, run, p, name, targets))
    await utilization.write_pages(store, writer, tables)
    await judges.write_pages(store, writer, paneled)
    unwritten = None if report.data_written or user_data == "served" else report.user_runs
    writer.write(userdata.APP, _app_shell(summary, unwritten))
    if report.data_written:
        await report.write_data(writer)
    writer.remove_stale()
    return report


class Report:
    """A written report: its index and what it needs to produce a user's data file."""

    def __init__(self, index: Path, store: Store, summary: Summary):
        self.index, self.store, self.summary = index, store, summary
        self.data_written = False

    @functools.cached_property
    def user_runs(self) -> int:
        """How many (user, run) pairs the report covers: what its users' data files hold."""
        return sum(self.summary.has_user(r, uid) for r in self.summary.runs
                   for uid in self.summary.users.get(r["bench"], ()))

    def users(self) -> dict[str, tuple[str, str]]:
        """data key -> (benchmark, user) of every user with a record in a reported run."""
        found = {}
        for bench, users in self.summary.users.items():
            runs = [r for r in self.summary.runs if r["bench"] == bench]
            found.update({userdata.data_key(bench, uid): (bench, uid) for uid in users
                          if any(self.summary.has_user(r, uid) for r in runs)})
        return found

    async def user_data(self, bench: str, uid: str) -> bytes:
        """The bytes of the user's data file."""
        return userdata.encode(bench, uid, await self._payload(bench, uid))

    async def _payload(self, bench: str, uid: str) -> dict:
        runs = [r for r in self.summary.runs if r["bench"] == bench]
        return await _user_payload(self.store, self.summary, bench, runs, uid)

    async def write_data(self, writer: "_Writer") -> None:
        """Every user's data file. Compressing is most of a file's cost and zlib lets go of the
        interpreter meanwhile, so a worker thread encodes and writes one user while the next one is
        read from the store: one user waits between them (memory stays that of two users)."""
        send, receive = anyio.create_memory_object_stream(1)

        async def encode_and_write() -> None:
            async with receive:
                async for bench, uid, payload in receive:
                    content = await anyio.to_thread.run_sync(userdata.encode, bench, uid, payload)
                    writer.write(userdata.data_file(bench, uid), content)

        async with anyio.create_task_group() as group:
            group.start_soon(encode_and_write)
            async with send:
                for bench, uid in self.users().values():
                    await send.send((bench, uid, await self._payload(bench, uid)))


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

    def write(self, rel: str, content: str | bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        target = inside(self.root, path, label=rel)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
        self.written.add(path)

    def remove_stale(self) -> None:
        """Pages and data files not written this time; `users/` held the per-user pages of earlier reports."""
        for tree, pattern in (("runs", "*.html"), ("users", "*.html"), (userdata.DATA_DIR, "*.js")):
            for path in sorted((self.root / tree).rglob(pattern)):
                if path not in self.written:
                    path.unlink()


# -- page paths --------------------------------------------------------------------------------
def _run_page(run: str) -> str:
    return f"runs/{slug(run)}.html"


def _pass_page(p: Pass) -> str:
    return f"runs/{slug(p.run)}/{p.slug}.html"


def _list_page(p: Pass, name: str) -> str:
    return f"runs/{slug(p.run)}/{p.slug}/{slug(name)}.html"


def _pass_anchor(p: Pass) -> str:
    return f"{slug(p.run)}-{p.slug}"


# -- index -------------------------------------------------------------------------------------
def _index_page(summary: Summary, tables: dict, judges_section: str) -> str:
    resolve = _resolver(summary)
    parts = [_runs_section(summary, tables.get("table2") or []), f"<h2>{esc(PREFACE)}</h2>"
             + legend_list(common_legend("html"))]
    parts.append(_table2(tables.get("table2") or [], resolve))
    parts.append(_table3(tables.get("table3") or [], resolve))
    parts.append(_table4(tables.get("table4") or [], resolve))
    for key in ("footprint", "health", "gap", "tokens", "comparisons", "prompts"):
        rows = tables.get(key) or []
        parts.append(f"<h2>{esc(title(key))}</h2>" + (declared(DECLARED[key], rows, resolve) if rows
                                                      else '<p class="muted">nothing recorded</p>'))
    parts.append(utilization.index_sections(tables, resolve))
    if tables.get("evolving"):
        parts.append(evolving.index_section(tables, resolve))
    parts.append(judges_section)
    parts.append(_users_section(summary))
    return page(INDEX, "memaudit audit report", "\n".join(parts))


def _runs_section(summary: Summary, table2: list[dict]) -> str:
    """Every run with its config and the models its roles ran on (Table 2's `models`, shown here)."""
    models = {row["run"]: row.get("models") or {} for row in table2}
    rows = []
    for r in summary.runs:
        cfg = r["config"] or {}
        rows.append([link(INDEX, _run_page(r["run"]), esc(r["run"])), esc(r["system"]), esc(r["bench"]),
                     esc(r["origin"]), f'<td class="n">{len(summary.run_users(r))}</td>',
                     esc(", ".join(f"{k}={cfg[k]}" for k in ("tasks", "max_turns", "k", "tag") if cfg.get(k) is not None)),
                     f'<td class="models">{esc(models_text(models.get(r["run"], {})) or "—")}</td>'])
    return ("<h2>Runs</h2>" + table(["run", "system", "benchmark", "origin", "users", "config", "models"], rows)
            + '<p class="note">Every number below links to the rows it was computed from; follow the links '
              "down to a single target and the transcript turns that did or did not reveal it.</p>")


def _table2(rows: list[dict], resolve) -> str:
    colours = run_colours((row["run"], row["system"]) for row in rows)
    panels = [(f"B {MODE_NAMES[mode]}", [(row["run"], [(row["run"], row.get(f"B_{mode}"), row.get(f"B_{mode}_ci95"))])
                                           for row in rows]) for mode in MODES]
    return (f"<h2>{esc(title('table2'))}</h2>"
            + declared(TABLE2, rows, resolve)
            + panel_chart("Recovery B per run, one panel per access mode (mean over users, 95% user-bootstrap "
                          "interval; n/a: not scored)", panels, colours))


def _resolver(summary: Summary):
    """Where a declared cell links (memaudit/report/columns.py): its run's page, the pass it reads,
    that pass's overflow list or the list of the targets with the key's attribution label."""
    runs = {r["run"] for r in summary.runs}

    def resolve(column: Column, row: dict, key: str) -> tuple[str, None] | None:
        if column.link == "run":
            return (_run_page(row["run"]), None) if row["run"] in runs else None
        p = _row_pass(summary, row, key)
        if p is None:
            return None
        if column.link in ("overflow", "label"):
            listed = "status-overflow" if column.link == "overflow" else key
            return (_list_page(p, listed), None) if value(row, key) else None
        return _pass_page(p), None
    return resolve


def _row_pass(summary: Summary, row: dict, key: str) -> Pass | None:
    """The pass a cell reads: its row's (Tables 3 and 4 have a row per pass), else the access mode
    its key names at the row's headline k (Table 2)."""
    if "mode" in row:
        return summary.find_pass(row["run"], row["mode"], row.get("k"))
    mode = next((m for m in MODES if m in key), None)
    return summary.find_pass(row["run"], mode, row.get("retrieve_k")) if mode else None


def _table3(rows: list[dict], resolve) -> str:
    colours = run_colours((row["run"], row["system"]) for row in rows)
    passes: dict[str, list[dict]] = {}
    for row in rows:
        if row["users"]:  # a mode that was not scored has no panel (Table 2's chart says n/a)
            passes.setdefault(mode_name(row), []).append(row)
    panels = [(name, [(key, [(row["run"], row[key], row[f"{key}_ci95"]) for row in found])
                      for key in (*CATEGORIES, "overall")]) for name, found in passes.items()]
    return (f"<h2>{esc(title('table3'))}</h2>" + declared(TABLE3, rows, resolve)
            + (panel_chart("Recovery per category, one panel per scoring pass (mean over users, 95% user-bootstrap "
                           "interval; n/a: no target of the category)", panels, colours) if panels else ""))


def _table4(rows: list[dict], resolve) -> str:
    stacks = [(f"{row['run']} · {mode_name(row)}", {lb: row[lb] for lb in ATTRIBUTION_LABELS})
              for row in rows if any(row.get(lb) for lb in ATTRIBUTION_LABELS)]
    return (f"<h2>{esc(title('table4'))}</h2>" + declared(TABLE4, rows, resolve)
            + (stacked_chart("Attribution of every target", stacks, LABEL_COLOURS) if stacks else ""))


def _users_section(summary: Summary) -> str:
    parts = ["<h2>Users</h2>"]
    for bench, users in summary.users.items():
        bench_runs = [r for r in summary.runs if r["bench"] == bench]
        shown = [u for u in users if any(summary.has_user(r, u) for r in bench_runs)]
        items = "".join(f"<li>{_user_link(INDEX, bench, u, esc(u))}</li>" for u in shown)
        parts.append(f"<h3>benchmark {esc(bench)}</h3><ul class=\"links\">{items}</ul>")
    return "".join(parts)


# -- run and pass pages ------------------------------------------------------------------------
def _run_overview(summary: Summary, run: dict) -> str:
    path = _run_page(run["run"])
    passes = summary.run_passes(run["run"])
    rows = []
    for user in summary.run_users(run):
        m = summary.metrics[run["run"]].get(user)
        bench, name = run["bench"], run["run"]
        row = [_user_link(path, bench, user, esc(user)),
               _user_link(path, bench, user, f"{m.episodes if m else 0} episodes", "episodes", run=name)]
        row += [_user_link(path, bench, user, text, "episodes", run=name) for text in
                (num(m.A * 100 if m else None, 1), num(m and m.C, 2), num(m and m.D, 2))]
        row += [_user_link(path, bench, user, num(m and m.items, 0), "memory", run=name), num(m and m.chars, 1),
                num(m and m.memory_write_failures, 0)]
        for p in passes:
            row.append(_user_link(path, bench, user, num(_recovery(summary, p, user)), anchor=_pass_anchor(p)))
        rows.append([c if i < 2 else f'<td class="n">{c}</td>' for i, c in enumerate(row)])
    source = RunConfig.from_json(run["config"]).transcripts
    transcripts = []
    if source:
        shown = link(path, _run_page(source), esc(source)) if any(r["run"] == source for r in summary.runs) \
            else esc(source)
        transcripts = [("transcripts", f"teacher-forced: memory was fed the recorded episodes of {shown}, "
                                       "whose A, C and D these are")]
    cfg = dl([("system", esc(run["system"])), ("benchmark", esc(run["bench"])), ("origin", esc(run["origin"])),
              *transcripts]) + _run_config(run["config"] or {})
    pass_links = " · ".join(link(path, _pass_page(p), esc(p.name)) for p in passes) or "not scored"
    per_user = ["A (%)", "C", "D (/5)", "items", "chars/item", "memory write failures"]
    headers = ["user", "episodes", *per_user, *[f"B {p.name}" for p in passes]]
    meanings = dict(legend(TABLE2))  # md's: each count its own column
    return page(path, f"run {run['run']}",
                cfg + f"<p>scoring passes: {pass_links}</p><h2>Per user</h2>" + table(headers, rows)
                + legend_list([("episodes", "episodes the user played in this run"),
                               *((name, meanings[name]) for name in per_user),
                               ("B <pass>", f"the user's B in that scoring pass: {meanings['B full-store']}")]),
                [(INDEX, "report")])


# Where a run's provenance keeps its library's configuration card (issue 41): one row per setting.
CARD = "configuration"
CARD_COLUMNS = ("setting", "library_default", "used", "why")


def _run_config(config: dict) -> str:
    """A run's config as tables: what it ran (users, tasks, turns, k, tag …), how it was made (the
    provenance's plain values), the model each role was sent to and with what, and the deployed
    library's configuration card, each setting it runs with beside the library's default."""
    provenance = config.get("provenance") or {}
    roles = provenance.get("roles") or {}
    card = provenance.get(CARD) or []
    plain = {k: v for k, v in provenance.items() if k not in ("roles", CARD)}
    parts = ["<h2>Configuration</h2>", dl([(k, _config_value(v)) for k, v in config.items() if k != "provenance"]),
             "<h3>Provenance</h3>", dl([(k, _config_value(v)) for k, v in plain.items()]) if plain
             else '<p class="muted">none recorded</p>']
    if roles:
        keys = list(dict.fromkeys(key for sent in roles.values() for key in sent))
        parts += ["<h3>Roles: what each was sent</h3>",
                  table(["role", *keys], [[esc(role), *(_config_value(sent.get(key)) for key in keys)]
                                          for role, sent in sorted(roles.items())])]
    if card:
        parts += ["<h3>The library's configuration card</h3>",
                  table(list(CARD_COLUMNS), [[_config_value(row.get(c)) for c in CARD_COLUMNS] for row in card])]
    return "".join(parts)


def _config_value(value) -> str:
    """A config value as HTML: a list or map as compact JSON, n/a for nothing."""
    if value is None:
        return '<span class="muted">—</span>'
    if isinstance(value, (dict, list)):
        return f"<code>{esc(dumps(value))}</code>"
    return esc(str(value))


def _pass_overview(summary: Summary, run: dict, p: Pass, rows_of: data.PassRows, lists: dict[str, list]) -> str:
    path = _pass_page(p)
    rows = []
    for user in summary.run_users(run):
        def grid(text: str, anchor: str) -> str:
            return _user_link(path, run["bench"], user, text, anchor=anchor)

        cells = [grid(esc(user), _pass_anchor(p))]
        for category in CATEGORIES:
            value = _recovery(summary, p, user, category)
            cells.append(f'<td class="n {score_class(value)}">{grid(num(value), category)}</td>')
        statuses = [r.status for r in rows_of.scores.get(user, {}).values()]
        cells.append(f'<td class="n">{grid(num(_recovery(summary, p, user)), _pass_anchor(p))}</td>')
        cells += [f'<td class="n">{statuses.count(s)}</td>' for s in ("ok", "overflow", "failed")]
        rows.append(cells)
    list_links = " · ".join(f"{link(path, _list_page(p, name), esc(name))} ({len(targets)})"
                            for name, targets in lists.items())
    headers = ["user", *CATEGORIES, "B", "judged", "overflow", "failed"]
    return page(path, f"{run['run']} · {p.name}",
                f"<p>targets by attribution label or status: {list_links or 'none'}</p>"
                + "<h2>Per user and category</h2>" + table(headers, rows),
                [(INDEX, "report"), (_run_page(run["run"]), run["run"])])


def _target_lists(rows: data.PassRows) -> dict[str, list[tuple[str, str]]]:
    """Targets (user, dimension) per attribution label, plus those whose reconstruction overflowed or failed."""
    lists: dict[str, list[tuple[str, str]]] = {}
    for user, labels in sorted(rows.labels.items()):
        for dimension, label in sorted(labels.items()):
            lists.setdefault(label, []).append((user, dimension))
    for user, scored in sorted(rows.scores.items()):
        for dimension, row in sorted(scored.items()):
            if row.status in ("overflow", "failed"):
                lists.setdefault(f"status-{row.status}", []).append((user, dimension))
    order = [*ATTRIBUTION_LABELS, "status-overflow", "status-failed"]
    return {name: lists[name] for name in sorted(lists, key=lambda n: (order.index(n) if n in order else 99, n))}


def _target_list(rows_of: data.PassRows, run: dict, p: Pass, name: str, targets: list[tuple[str, str]]) -> str:
    """A list of targets, as data the page renders into a table (assets/user.js, `list`): a list
    holds every target of a pass at worst, and as HTML rows (two drill-down links each) the lists
    were most of the report's pages and of its time."""
    path = _list_page(p, name)
    categories: dict[str, int] = {}
    rows = []
    for user, dimension in targets:
        row = rows_of.scores.get(user, {}).get(dimension, data.NO_TARGET)
        category = categories.setdefault(row.category, len(categories))
        rows.append([user, category, dimension, row.score, row.status, row.label or ""])
    listing = {"app": posixpath.relpath(userdata.APP, posixpath.dirname(path)), "anchor": _pass_anchor(p),
               "keys": {user: userdata.data_key(run["bench"], user) for user, _ in targets}, "statuses": STATUS_TEXT,
               "categories": list(categories), "rows": rows}
    script = orjson.dumps(listing).decode().replace("</", "<\\/")
    levels = orjson.dumps(score_levels()).decode()
    return page(path, f"{run['run']} · {p.name} · {name}",
                f'<p>{count(len(targets), "target")}.</p><div id="list"><noscript>This list needs JavaScript.</noscript></div>'
                f'<script>window.MEMAUDIT = {{"list": {script}, "levels": {levels}}};</script>'
                f'<script src="{href(path, USER_SCRIPT)}"></script>',
                [(INDEX, "report"), (_run_page(run["run"]), run["run"]), (_pass_page(p), p.name)])


# -- user drill-down: the shared page and one data file per user -------------------------------
def _user_link(from_page: str, bench: str, uid: str, text: str, view: str = "grid", **where) -> str:
    return link(from_page, userdata.APP, text, anchor=userdata.app_anchor(bench, uid, view, **where))


def _app_shell(summary: Summary, unwritten: int | None = None) -> str:
    """`user.html`: what every user view needs besides the user's data (run pages, constants);
    `unwritten`: the user-runs whose data this report leaves out (the page then says how to get it)."""
    config = {"index": INDEX, "data": userdata.DATA_DIR, "charset": userdata.CHARSET, "ref": userdata.MEMORY_REF,
              "categories": list(CATEGORIES),
              "marks": LABEL_MARKS, "runs": {r["run"]: _run_page(r["run"]) for r in summary.runs},
              "statuses": STATUS_TEXT, "legend": TARGET_LEGEND, "levels": score_levels()}
    if unwritten is not None:
        config["unwritten"] = (f"this report was written without its users' data ({unwritten} user-runs): serve it "
                               "with `memaudit view --serve --out DIR`, or write it with `--user-data all`")
    script = orjson.dumps(config).decode().replace("</", "<\\/")
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>user · memaudit</title>'
            f'<link rel="stylesheet" href="{STYLESHEET}"><script>window.MEMAUDIT = {script};</script>'
            f'<script src="{USER_SCRIPT}"></script></head>\n<body><nav class="crumbs" id="crumbs"></nav>\n'
            '<main id="app"><noscript>This page shows one user of the report; it needs JavaScript.</noscript></main>'
            "</body></html>\n")


async def _user_payload(store: Store, summary: Summary, bench: str, runs: list[dict], uid: str) -> dict:
    user = await store.benchmarks.user_row(bench, uid)
    runs = [r for r in runs if summary.has_user(r, uid)]
    names = [r["run"] for r in runs]
    detail = await data.load_user_detail(store, names, uid)
    snapshots = {name: await store.episodes.last_snapshot(name, uid) for name in names}
    passes = {name: [_pass_row(summary, p, uid) for p in summary.run_passes(name)] for name in names}
    tasks = {t["idx"]: t["target_dimension"] for t in user["tasks"]}

    def episode_href(run: str, task_idx: int, turn: int, dimension: str) -> str:
        """A turn from within the user's views: on the page of the target its task aims at."""
        where = userdata.app_anchor(bench, uid, "target", dimension=tasks.get(task_idx, dimension),
                                    anchor=f"{slug(run)}-e{task_idx}-t{turn}")
        return esc(f"#{where}")
    history = await evolving.target_sections(store, bench, uid, names, episode_href)
    return userdata.payload(user, runs, passes, detail, snapshots, _citations, {"target": history})


def _pass_row(summary: Summary, p: Pass, uid: str) -> dict:
    rec = summary.recovery[p].get(uid)
    return {"name": p.name, "slug": p.slug, "anchor": _pass_anchor(p), "page": _pass_page(p),
            "B": None if rec is None else rec.B, "categories": {} if rec is None else rec.categories}


def _recovery(summary: Summary, p: Pass, uid: str, category: str | None = None) -> float | None:
    """A user's B in a pass, or the mean of one category."""
    rec = summary.recovery[p].get(uid)
    if rec is None:
        return None
    return rec.B if category is None else rec.categories.get(category)


# -- citations: what attribution stages point at in the transcript ----------------------------
def _stage_name(position: int, stage) -> str:
    if not isinstance(stage, dict):
        return str(position)
    number, name = stage.get("stage", position), stage.get("name")
    return f"{number} · {name}" if name else str(number)


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


