"""Small HTML building blocks for the static report: escaping, links between pages, tables,
score cells and inline SVG charts. Every piece of text that came from a model, a user or a
file goes through `esc`; everything here returns plain strings."""
from __future__ import annotations

import functools
import hashlib
import html
import posixpath
import re
from typing import Iterable

from memaudit.types import RUBRIC

INDEX = "index.html"  # the report's first page: every other page links back to it
STYLESHEET = "assets/style.css"

# Colours of attribution labels in charts and legends (same order as ATTRIBUTION_LABELS).
LABEL_COLOURS = {"ok": "#5a9e57", "memory_failure": "#d1495b", "task_design_failure": "#8d6cab",
                 "agent_elicitation_failure": "#edae49", "simulator_too_strict": "#00798c",
                 "no_targeted_task": "#9e9e9e", "unclassified": "#c7c7c7", "overflow": "#30343f"}


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


@functools.lru_cache(maxsize=65536)  # a report slugs the same few run and user ids for every link
def slug(name: str) -> str:
    """A file-name-safe form of an id; ids that had to change get a hash so they stay distinct."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".")
    if safe == name and safe:
        return safe
    return f"{safe[:60]}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def href(from_page: str, to_page: str, anchor: str | None = None) -> str:
    """Relative link between two report pages (paths relative to the report root)."""
    folder, name = posixpath.split(to_page)
    rel = posixpath.join(_relative_folder(folder, posixpath.dirname(from_page)), name)
    return esc(rel + (f"#{anchor}" if anchor else ""))


@functools.lru_cache(maxsize=4096)
def _relative_folder(folder: str, start: str) -> str:
    """`folder` relative to `start` (both relative to the report root). A report links between a
    few dozen folders a million times: `posixpath.relpath` per link was a third of its time."""
    rel = posixpath.relpath(folder or ".", start or ".")
    return "" if rel == "." else rel


def link(from_page: str, to_page: str, text, anchor: str | None = None, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f'<a href="{href(from_page, to_page, anchor)}"{attr}>{text}</a>'


def page(path: str, title: str, body: str, crumbs: Iterable[tuple[str, str]] = ()) -> str:
    """A whole HTML document; `crumbs` are (page path, text) pairs leading back to the index."""
    trail = " › ".join([link(path, to, esc(text)) for to, text in crumbs] + [esc(title)])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)} · memaudit</title>"
            f'<link rel="stylesheet" href="{href(path, STYLESHEET)}"></head>\n<body>'
            f'<nav class="crumbs">{trail}</nav>\n<main>\n<h1>{esc(title)}</h1>\n{body}\n</main></body></html>\n')


def table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    """Headers are plain text (escaped here; long snake_case names may break after an underscore);
    row cells are already HTML. Wide tables scroll sideways instead of stretching the page."""
    head = "".join(f"<th>{esc(h).replace('_', '_<wbr>')}</th>" for h in headers)
    body = "\n".join("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in row) + "</tr>"
                     for row in rows)
    return (f'<div class="scroll"><table class="{cls}"><thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n'
            "</tbody></table></div>")


def num(value, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def count(n: int, noun: str) -> str:
    """`1 target`, `2 targets`."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def mean_std_text(mean, std, digits: int = 3) -> str:
    if mean is None:
        return "—"
    return num(mean, digits) + ("" if std is None else f' <span class="std">± {num(std, digits)}</span>')


def score_class(score: float | None) -> str:
    """The CSS class of the rubric level a score (or a mean of scores) reaches: s100, s75 … s0."""
    if score is None:
        return "snone"
    return f"s{round(RUBRIC.level(score).score * 100)}"


def score_levels() -> list[list]:
    """The rubric's levels as the report's scripts read them (window.MEMAUDIT.levels): [score, CSS
    class] pairs, best first, so assets/user.js colours a score exactly as score_class does."""
    return [[level.score, score_class(level.score)] for level in RUBRIC.levels]


def legend_list(pairs: Iterable[tuple[str, str]]) -> str:
    """What a table's columns mean, shown under it (plain text pairs, escaped here)."""
    items = "".join(f"<dt>{esc(name)}</dt><dd>{_code(esc(meaning))}</dd>" for name, meaning in pairs)
    return f'<dl class="legend">{items}</dl>' if items else ""


def _code(text: str) -> str:
    """`name` in a legend (written for md too) as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def dl(pairs: Iterable[tuple[str, str]]) -> str:
    """A definition list; values are already HTML."""
    return '<dl class="kv">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


# One bar of a panel chart: (series, value, 95% interval or None); a value of None reads "n/a".
Bar = tuple[str, "float | None", "list[float] | None"]


def panel_chart(title: str, panels: list[tuple[str, list[tuple[str, list[Bar]]]]], colours: dict[str, str]) -> str:
    """Panels side by side, each horizontal bars on a 0–1 axis in groups, one colour per series in
    every panel (`colours`), with the 95% interval as a whisker; a zero bar is a visible sliver,
    a missing value reads "n/a". One legend for all panels."""
    figures = "".join(_panel(name, groups, colours) for name, groups in panels)
    legend = "".join(f'<span class="key"><i style="background:{c}"></i>{esc(s)}</span>' for s, c in colours.items())
    return (f'<figure class="panels"><figcaption>{esc(title)}</figcaption><div class="panel-row">{figures}</div>'
            f'<div class="legend">{legend}</div></figure>')


def _panel(name: str, groups: list[tuple[str, list[Bar]]], colours: dict[str, str]) -> str:
    bar_h, gap, label_w, plot_w, right = 13, 8, 150, 260, 64
    height = 28 + sum(len(bars) * bar_h + gap for _, bars in groups) + 20
    width = label_w + plot_w + right
    parts = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" height="{height}">'
             f"<title>{esc(name)}</title>"
             f'<text x="{label_w}" y="12" class="ptitle">{esc(name)}</text>']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = label_w + tick * plot_w
        parts.append(f'<line x1="{x:.1f}" y1="18" x2="{x:.1f}" y2="{height - 16}" class="grid"/>'
                     f'<text x="{x:.1f}" y="{height - 4}" class="tick">{tick:g}</text>')
    y = 24
    for group, bars in groups:
        parts.append(f'<text x="{label_w - 8}" y="{y + len(bars) * bar_h / 2 + 4:.1f}" class="glabel">{esc(group)}</text>')
        for series, value, ci in bars:
            parts.append(_bar(name, group, series, value, ci, colours.get(series, "#777"), label_w, plot_w, y, bar_h))
            y += bar_h
        y += gap
    parts.append("</svg>")
    return f'<div class="panel">{"".join(parts)}</div>'


def _bar(panel: str, group: str, series: str, value, ci, colour: str, label_w: int, plot_w: int, y: float,
         bar_h: int) -> str:
    where = f'data-panel="{esc(panel)}" data-series="{esc(series)}"'
    if value is None:
        return f'<text x="{label_w + 4}" y="{y + bar_h - 3}" class="val na" {where}>n/a</text>'
    w = max(min(value, 1.0), 0.0) * plot_w
    shown = f"{value:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
    # a zero bar keeps a 2-pixel sliver of its colour: 0 is a result, not a missing bar
    parts = [f'<rect class="bar" x="{label_w}" y="{y + 1}" width="{max(w, 2.0):.1f}" height="{bar_h - 2}" '
             f'fill="{colour}" {where}><title>{esc(group)} · {esc(series)}: {shown}</title></rect>']
    end = label_w + w
    if ci:
        lo, hi = (label_w + max(min(v, 1.0), 0.0) * plot_w for v in ci)
        mid = y + bar_h / 2
        parts.append(f'<path class="err" d="M{lo:.1f},{mid - 3:.1f}v6M{lo:.1f},{mid:.1f}H{hi:.1f}M{hi:.1f},'
                     f'{mid - 3:.1f}v6"/>')
        end = max(end, hi)
    parts.append(f'<text x="{end + 4:.1f}" y="{y + bar_h - 3}" class="val">{value:.3f}</text>')
    return "".join(parts)


def stacked_chart(title: str, rows: list[tuple[str, dict[str, int]]], colours: dict[str, str]) -> str:
    """One horizontal 100 % bar per row, split by label counts."""
    bar_h, gap, label_w, plot_w = 16, 6, 230, 420
    height = 10 + len(rows) * (bar_h + gap) + 10
    parts = [f'<svg class="chart" role="img" viewBox="0 0 {label_w + plot_w + 10} {height}" '
             f'width="{label_w + plot_w + 10}" height="{height}"><title>{esc(title)}</title>']
    y = 10
    for name, counts in rows:
        total = sum(counts.values())
        parts.append(f'<text x="{label_w - 8}" y="{y + bar_h - 4}" class="glabel">{esc(name)}</text>')
        x = float(label_w)
        for label, colour in colours.items():
            n = counts.get(label, 0)
            if n and total:
                w = n / total * plot_w
                parts.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colour}">'
                             f'<title>{esc(name)} {esc(label)}: {n}</title></rect>')
                x += w
        y += bar_h + gap
    parts.append("</svg>")
    legend = "".join(f'<span class="key"><i style="background:{c}"></i>{esc(s)}</span>' for s, c in colours.items())
    return f'<figure><figcaption>{esc(title)}</figcaption>{"".join(parts)}<div class="legend">{legend}</div></figure>'
