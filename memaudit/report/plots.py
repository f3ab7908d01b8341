"""Figures for `tables --out DIR`: recovery per category per system and mode, and the per-user
dump_all − retrieve gap. Drawn from the computed tables (no store access), PNG and SVG."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from memaudit.report.palette import run_colours  # noqa: E402
from memaudit.types import CATEGORIES  # noqa: E402

FORMATS = ("png", "svg")


def write_plots(tables: dict, out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in (("recovery_by_category", category_figure(tables["table3"])),
                      ("dump_retrieve_gap", gap_figure(tables["gap"]))):
        for fmt in FORMATS:
            path = out_dir / f"{name}.{fmt}"
            # a fixed date keeps the SVG bytes reproducible
            fig.savefig(path, dpi=150, bbox_inches="tight", metadata={"Date": None} if fmt == "svg" else None)
            written.append(path)
        plt.close(fig)
    return written


def category_figure(table3: list[dict]):
    """One panel per access mode (and k): grouped bars of B per category, one bar per run in its
    system's colour in every panel (memaudit/report/palette.py), with its 95% user-bootstrap
    interval; a zero bar shows as a line at 0, a missing value as "n/a"."""
    colours = run_colours((row["run"], row["system"]) for row in table3)
    panels: dict[str, list[dict]] = {}
    for row in table3:
        if row["overall"] is not None:
            label = row["mode"] if row["k"] is None else f"{row['mode']} (k={row['k']})"
            panels.setdefault(label, []).append(row)
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(6 * max(1, len(panels)), 4), squeeze=False)
    x = np.arange(len(CATEGORIES))
    for ax, (label, rows) in zip(axes[0], panels.items()):
        width = 0.8 / len(rows)
        for i, row in enumerate(rows):
            _bars(ax, x + (i - (len(rows) - 1) / 2) * width, width, row, colours[row["run"]])
        ax.set_title(f"recovery B — {label}")
        ax.set_xticks(x, [c.replace("_", "\n") for c in CATEGORIES], fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("mean score over users [95% CI]")
        ax.legend(fontsize=7)
    if not panels:
        axes[0][0].text(0.5, 0.5, "no recovery scores", ha="center", va="center")
    fig.tight_layout()
    return fig


def _bars(ax, xs, width: float, row: dict, colour: str) -> None:
    """One run's bars in a panel: each category's mean with its interval where it has one."""
    means = [row[c] for c in CATEGORIES]
    ax.bar(xs, [np.nan if m is None else m for m in means], width, color=colour, label=row["run"])
    for x, category, mean in zip(xs, CATEGORIES, means):
        ci = row.get(f"{category}_ci95")
        if mean is None:
            ax.text(x, 0.02, "n/a", ha="center", va="bottom", fontsize=6, rotation=90, color="#555")
        elif mean == 0:  # a zero bar has no height: a line at 0 keeps it visible
            ax.hlines(0.004, x - width / 2, x + width / 2, colors=colour, linewidth=2.5)
        if mean is not None and ci is not None:
            ax.errorbar(x, mean, yerr=[[mean - ci[0]], [ci[1] - mean]], fmt="none", ecolor="#222", elinewidth=0.8,
                        capsize=2)


def gap_figure(gap_rows: list[dict]):
    """Distribution of per-user B(dump_all) − B(retrieve) per run: a box plot with the users as dots
    in the run's system colour."""
    colours = run_colours((r["run"], r["system"]) for r in gap_rows)
    rows = [r for r in gap_rows if r["per_user"]]
    fig, ax = plt.subplots(figsize=(max(4, 1.4 * len(rows) + 2), 4))
    if rows:
        data = [list(r["per_user"].values()) for r in rows]
        ax.boxplot(data, showfliers=False)
        for i, (row, values) in enumerate(zip(rows, data), start=1):
            jitter = np.linspace(-0.15, 0.15, len(values)) if len(values) > 1 else [0.0]
            ax.scatter(i + np.asarray(jitter), values, s=8, alpha=0.8, color=colours[row["run"]])
        ax.set_xticks(range(1, len(rows) + 1), [r["run"] for r in rows], rotation=20, fontsize=8)
    else:
        ax.text(0.5, 0.5, "no run scored in both modes", ha="center", va="center", transform=ax.transAxes)
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_ylabel("B(dump_all) − B(retrieve) per user")
    ax.set_title("per-user dump − retrieve gap")
    fig.tight_layout()
    return fig
