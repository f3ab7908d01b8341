"""One colour per memory system, the same in every panel of the HTML report and every figure of
`tables --out`: systems take hues in the order of their names, and the runs of one system take
shades of its hue (its first run, in name order, the hue itself). Charts never colour by position
in a panel, where a system missing from one panel would shift every colour after it."""
from __future__ import annotations

from typing import Iterable

# Distinct hues that stay apart for readers with the common colour-vision deficiencies (Okabe-Ito,
# then Tableau's), grey last: it reads as "no memory" beside them.
HUES = ("#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#8c564b", "#bcbd22", "#f0e442",
        "#17becf", "#7f7f7f")
SHADES = (0.0, 0.45, -0.35, 0.65, -0.55)  # lighten (+) or darken (−) toward white or black


def run_colours(runs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """(run, system) pairs -> run -> colour."""
    by_system: dict[str, set[str]] = {}
    for run, system in runs:
        by_system.setdefault(system, set()).add(run)
    colours = {}
    for i, system in enumerate(sorted(by_system)):
        hue = HUES[i % len(HUES)]
        for j, run in enumerate(sorted(by_system[system])):
            colours[run] = shade(hue, SHADES[j % len(SHADES)])
    return colours


def shade(colour: str, amount: float) -> str:
    """`#rrggbb` moved `amount` of the way toward white (> 0) or black (< 0)."""
    channels = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    target = 255 if amount > 0 else 0
    return "#" + "".join(f"{round(c + (target - c) * abs(amount)):02x}" for c in channels)
