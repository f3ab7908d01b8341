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


def dl(pairs: Iterable[tuple[str, str]]) -> str:
    """A definition list; values are already HTML."""
    return '<dl class="kv">' + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in pairs) + "</dl>"


def bar_chart(title: str, groups: list[tuple[str, list[tuple[str, float | None, float | None]]]],
              series_colours: dict[str, str]) -> str:
    """Horizontal bars on a 0–1 axis: one group per system, one bar per series (mean ± std)."""
    bar_h, gap, label_w, plot_w = 14, 10, 190, 420
    height = 30 + sum(len(bars) * bar_h + gap for _, bars in groups) + 20
    parts = [f'<svg class="chart" role="img" viewBox="0 0 {label_w + plot_w + 80} {height}" '
             f'width="{label_w + plot_w + 80}" height="{height}"><title>{esc(title)}</title>']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = label_w + tick * plot_w
        parts.append(f'<line x1="{x:.1f}" y1="20" x2="{x:.1f}" y2="{height - 16}" class="grid"/>'
                     f'<text x="{x:.1f}" y="{height - 4}" class="tick">{tick:g}</text>')
    y = 26
    for group, bars in groups:
        parts.append(f'<text x="{label_w - 8}" y="{y + len(bars) * bar_h / 2 + 4:.1f}" class="glabel">{esc(group)}</text>')
        for series, mean, std in bars:
            if mean is not None:
                w = max(mean, 0.0) * plot_w
                parts.append(f'<rect x="{label_w}" y="{y + 1}" width="{w:.1f}" height="{bar_h - 2}" '
                             f'fill="{series_colours.get(series, "#777")}"><title>{esc(group)} {esc(series)}: '
                             f'{mean:.3f}</title></rect>')
                end = label_w + w
                if std:
                    lo, hi = label_w + max(mean - std, 0) * plot_w, label_w + min(mean + std, 1) * plot_w
                    mid = y + bar_h / 2
                    parts.append(f'<line x1="{lo:.1f}" y1="{mid:.1f}" x2="{hi:.1f}" y2="{mid:.1f}" class="err"/>')
                    end = max(end, hi)
                parts.append(f'<text x="{end + 4:.1f}" y="{y + bar_h - 3}" class="val">{mean:.3f}</text>')
            else:
                parts.append(f'<text x="{label_w + 4}" y="{y + bar_h - 3}" class="val">not scored</text>')
            y += bar_h
        y += gap
    parts.append("</svg>")
    legend = "".join(f'<span class="key"><i style="background:{c}"></i>{esc(s)}</span>'
                     for s, c in series_colours.items())
    return f'<figure><figcaption>{esc(title)}</figcaption>{"".join(parts)}<div class="legend">{legend}</div></figure>'


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
