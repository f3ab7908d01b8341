"""`tables --out` figures: a system keeps one colour in every panel and in the gap plot (a system
missing from a panel shifts no colour), a zero bar is drawn, a missing value reads "n/a", and every
bar with an interval carries its 95% error bar."""
from __future__ import annotations

from matplotlib.colors import to_hex

from memaudit.report.palette import run_colours
from memaudit.report.plots import category_figure, gap_figure
from memaudit.types import CATEGORIES


def row(run: str, system: str, mode: str, k, value):
    values = {c: value for c in (*CATEGORIES, "overall")}
    values[CATEGORIES[-1]] = None  # no target of the category
    return {"run": run, "system": system, "mode": mode, "k": k, **values,
            **{f"{c}_ci95": None if v is None else [max(v - 0.1, 0), v + 0.1] for c, v in values.items()}}


TABLE3 = [row("amem", "amem", "dump_all", None, 0.5), row("mem0", "mem0", "dump_all", None, 0.0),
          row("mem0", "mem0", "retrieve", 5, 0.25)]  # amem has no retrieve pass


def bar_colours(ax) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for container in ax.containers:
        if container.get_label() and not container.get_label().startswith("_"):
            found.setdefault(container.get_label(), set()).update(to_hex(p.get_facecolor()) for p in container.patches)
    return found


def test_one_colour_per_system_in_every_panel_with_intervals_zero_and_n_a():
    fig = category_figure(TABLE3)
    dump, retrieve = fig.axes
    expected = run_colours([("amem", "amem"), ("mem0", "mem0")])
    assert bar_colours(dump) == {"amem": {expected["amem"]}, "mem0": {expected["mem0"]}}
    assert bar_colours(retrieve) == {"mem0": {expected["mem0"]}}            # not amem's colour
    assert sum(t.get_text() == "n/a" for t in dump.texts) == 2              # each run's missing category
    zero_lines = [c for c in dump.collections if c.get_segments() and c.get_segments()[0][0][1] < 0.01]
    assert zero_lines                                                       # mem0's 0 bars are drawn
    error_bars = [c for c in dump.containers if type(c).__name__ == "ErrorbarContainer"]
    assert len(error_bars) == 2 * (len(CATEGORIES) - 1)                     # every bar with an interval


def test_the_gap_plot_colours_users_by_their_system():
    gaps = [{"run": "amem", "system": "amem", "per_user": {"u1": 0.1, "u2": 0.2}},
            {"run": "mem0", "system": "mem0", "per_user": {"u1": 0.0}}]
    ax = gap_figure(gaps).axes[0]
    expected = run_colours([("amem", "amem"), ("mem0", "mem0")])
    dots = [{to_hex(c) for c in collection.get_facecolors()} for collection in ax.collections
            if collection.get_offsets().shape[0]]
    assert dots == [{expected["amem"]}, {expected["mem0"]}]
