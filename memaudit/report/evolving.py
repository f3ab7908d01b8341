"""Evolving targets in the HTML report (issue 25): the `evolving` tables on the index, and on each
evolving target's page its history on a timeline, and per run the version that is its truth (the
one valid at the last task the run played), the episode where each change was disclosed and what
the run's memory kept of each version. Nothing is written for a static benchmark."""
from __future__ import annotations

from memaudit.report.columns import Resolve, declared
from memaudit.report.html import esc, table
from memaudit.tables.columns import mode_label
from memaudit.tables.evolving import EVOLVING, EVOLVING_TARGETS
from memaudit.tables.paper_render import title
from memaudit.types import DEFAULT_VARIANT, STORE_MODE, versions_until

WIDTH, HEIGHT, PAD = 640, 56, 16


def index_section(tables: dict, resolve: Resolve) -> str:
    """The run-level and per-target evolving tables, or nothing when the runs have no evolving target."""
    if not tables.get("evolving"):
        return ""
    return (f"<h2>{esc(title('evolving'))}</h2>"
            + declared(EVOLVING, tables["evolving"], resolve)
            + f"<h3>{esc(title('evolving_targets'))}</h3>"
            + declared(EVOLVING_TARGETS, tables["evolving_targets"], resolve))


async def target_sections(store, bench: str, user_id: str, runs: list[str], episode_href) -> dict[str, str]:
    """dimension -> the evolving section of its target page, for every evolving entry of the user.
    `episode_href(run, task, turn, dimension)` links a turn from that dimension's target page."""
    histories = {dim: h for (uid, dim), h in (await store.benchmarks.histories(bench)).items() if uid == user_id}
    if not histories:
        return {}
    disclosed = {}
    for run in runs:
        for r in await store.episodes.change_rows(run):
            if r["user_id"] == user_id:
                disclosed[(run, r["dimension"], r["version"])] = (r["task_idx"], r["turn"])
    judgments = [j for j in await store.evolving.load(runs, DEFAULT_VARIANT) if j.user_id == user_id]
    last_tasks = {run: max(await store.episodes.done(run, user_id), default=0) for run in runs}
    n_tasks = max(await store.benchmarks.most_tasks(bench) or 1, max(v.valid_from_task for h in histories.values()
                                                                      for v in h))
    return {dim: _section(dim, history, last_tasks, disclosed, judgments, n_tasks, episode_href)
            for dim, history in histories.items()}


def _section(dimension: str, history, last_tasks: dict[str, int], disclosed: dict, judgments, n_tasks: int,
             episode_href) -> str:
    rows = [[f'<td class="n">{i}</td>', esc(v.op), f'<td class="n">{v.valid_from_task}</td>', esc(v.short)]
            for i, v in enumerate(history)]
    parts = ["<h2>History of this entry</h2>", _timeline(history, n_tasks),
             table(["version", "op", "valid from task", "value"], rows)]
    for run, last_task in last_tasks.items():
        parts.append(f"<h3>{esc(run)}: disclosure and what memory kept</h3>")
        parts.append(_run_truth(history, last_task))
        parts.append(_kept(run, dimension, history, last_task, disclosed, judgments, episode_href))
    return "\n".join(parts)


def _run_truth(history, last_task: int) -> str:
    """Which version is the run's truth: the one valid at the last task it played (issue 33)."""
    valid = versions_until(history, last_task)
    if not valid:
        return f'<p class="muted">Played to task {last_task}: the entry was not yet true, no target of this run.</p>'
    kind = ("an evolving target" if any(v.valid_from_task > 1 for v in valid)
            else "a static target (no change inside this run)")
    return (f'<p class="muted">Played to task {last_task}: the truth is version {len(valid) - 1}, '
            f"{esc(kind)}; a version after task {last_task} is no target of this run.</p>")


def _x(task: int, n_tasks: int) -> float:
    return PAD + (WIDTH - 2 * PAD) * (task - 1) / max(n_tasks - 1, 1)


def _timeline(history, n_tasks: int) -> str:
    """Tasks 1..n on a line, a marker where each version takes effect."""
    marks = [f'<line x1="{PAD}" y1="{HEIGHT // 2}" x2="{WIDTH - PAD}" y2="{HEIGHT // 2}" stroke="#888"/>']
    for i, v in enumerate(history):
        x = _x(v.valid_from_task, n_tasks)
        colour = "#d1495b" if v.op == "delete" else "#1f5f8b"
        marks.append(f'<circle cx="{x:.1f}" cy="{HEIGHT // 2}" r="6" fill="{colour}"><title>version {i} '
                     f'({esc(v.op)}) from task {v.valid_from_task}: {esc(v.short)}</title></circle>')
        edge = "start" if x < PAD + 40 else "end" if x > WIDTH - PAD - 40 else "middle"  # not cut at the sides
        marks.append(f'<text x="{x:.1f}" y="{HEIGHT // 2 - 10}" font-size="11" text-anchor="{edge}">'
                     f'v{i} · task {v.valid_from_task}</text>')
    marks.append(f'<text x="{PAD}" y="{HEIGHT - 4}" font-size="10">task 1</text>'
                 f'<text x="{WIDTH - PAD}" y="{HEIGHT - 4}" font-size="10" text-anchor="end">task {n_tasks}</text>')
    return (f'<svg class="timeline" role="img" aria-label="history timeline" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}">{"".join(marks)}</svg>')


def _kept(run: str, dimension: str, history, last_task: int, disclosed: dict, judgments, episode_href) -> str:
    mine = [j for j in judgments if j.run == run and j.dimension == dimension]
    truth = len(versions_until(history, last_task)) - 1  # the version valid at the run's end
    rows = []
    for i, v in enumerate(history):
        where = disclosed.get((run, dimension, i))
        if where:
            episode = (f'<td><a href="{episode_href(run, where[0], where[1], dimension)}">'
                       f"episode {where[0]}, turn {where[1]}</a></td>")
        elif i > truth:
            episode = esc(f"after the run's end (task {last_task})")
        else:
            episode = esc("initial value: no change to disclose (see the targeted task's transcript)"
                          if v.valid_from_task == 1 else "not disclosed")
        store = [j.verdict for j in mine if j.mode == STORE_MODE and j.version == i]
        held = ("not a target" if i > truth else "the run's truth" if i == truth
                else _yes_no(store[0], "still held", "not held") if store else "–")
        asserted = [f"{_pass_label(j.mode, j.k)}: " + _yes_no(j.verdict if i == truth else not j.verdict, "asserted",
                                                  "not asserted")
                    for j in mine if j.mode != STORE_MODE and j.version == i]
        rows.append([f'<td class="n">{i}</td>', esc(v.short), episode, esc(held), esc("; ".join(asserted) or "–")])
    return table(["version", "value", "disclosed", "in the final store", "in the reconstruction"], rows)


def _pass_label(mode: str, k: int) -> str:
    """`dump_all`, `retrieve@5`: as the tables name a pass."""
    return mode_label({"mode": mode, "k": k if mode != "dump_all" else None})


def _yes_no(value: bool | None, yes: str, no: str) -> str:
    return "not judged" if value is None else (yes if value else no)
