"""A panel of scripted judges on the fake server: `top-a` and `top-b` always give the top score,
`low` always the lowest; any other model gives 0.5."""
from __future__ import annotations

from memaudit.scoring.panel import Panel

FIXED = {"top-a": 1.0, "top-b": 1.0, "low": 0.0}
PANEL = ["top-a", "top-b", "low"]


def fixed_judges(fake, scores: dict = FIXED):
    fake.on("recovery_judge", lambda body: {"score": scores.get(body["model"], 0.5), "reason": "scripted"})
    return fake


def panel(rt, names=PANEL, repeats: int = 1) -> Panel:
    return Panel.build(rt.llm, names, repeats)
