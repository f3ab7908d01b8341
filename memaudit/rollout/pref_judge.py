"""The preference judge: rates one assistant reply against the user's assistance preferences.
A turn's score is the mean of the integer ratings; a turn with none (all `na`, no preferences,
or a judge failure) is unscorable (None), never 0."""
from __future__ import annotations

from dataclasses import dataclass, field

from memaudit.ask import ask
from memaudit.errors import ContextOverflow, InvalidOutput
from memaudit.llm.client import LLM
from memaudit.prompts import rollout_layout
from memaudit.roles import PREF_JUDGE, REASON, STR, obj
from memaudit.published.layout import preference_values
from memaudit.types import BankEntry

SCORES = ("1", "2", "3", "4", "5", "na")


@dataclass
class PreferenceScore:
    score: float | None
    per_pref: list[dict] = field(default_factory=list)  # {idx, dimension, score: int | "na" | None[, error]}


def render_preferences(prefs: list[BankEntry]) -> str:
    return "\n".join(f"[{i}] {p.dimension}: {p.short}. {p.explanation}" for i, p in enumerate(prefs, 1))


def ratings_schema(count: int) -> dict:
    """One required key per preference number: grammar-constrained servers cannot skip one, and
    any other server's answer is checked against the same shape."""
    rating = {"type": "string", "enum": list(SCORES)}
    return obj(ratings=obj(**{str(i): rating for i in range(1, count + 1)}), summary=REASON)


def published_schema(count: int) -> dict:
    """The published judge's answer: one {idx, score (1-5 or "na"), reason} per preference, in order."""
    score = {"anyOf": [{"type": "integer", "minimum": 1, "maximum": 5}, {"type": "string", "enum": ["na"]}]}
    rating = obj(idx={"type": "integer"}, score=score, reason=STR)
    return obj(per_pref={"type": "array", "items": rating, "minItems": count, "maxItems": count})


async def judge_reply(llm: LLM, prefs: list[BankEntry], task: str, reply: str, *,
                      seed_parts: tuple) -> PreferenceScore:
    if not prefs:
        return PreferenceScore(None)
    layout = rollout_layout(llm.settings.prompts_dir)
    try:
        if layout is None:
            result = await ask(llm, PREF_JUDGE, schema=ratings_schema(len(prefs)), seed_parts=seed_parts,
                               preferences=render_preferences(prefs), count=len(prefs), task=task, reply=reply)
            raws = [result.data["ratings"][str(i)] for i in range(1, len(prefs) + 1)]
        else:  # the published pack: its request and answer shape (published/layout.py)
            result = await ask(llm, PREF_JUDGE, schema=published_schema(len(prefs)), seed_parts=seed_parts,
                               **preference_values(layout, prefs, task, reply))
            raws = [str(r["score"]) for r in result.data["per_pref"]]
    except (InvalidOutput, ContextOverflow) as exc:
        # A judge that could not answer leaves the turn unscorable; the failure stays visible.
        return PreferenceScore(None, [{"idx": i, "dimension": p.dimension, "score": None, "error": str(exc)}
                                      for i, p in enumerate(prefs, 1)])
    per_pref = [{"idx": i, "dimension": p.dimension, "score": raw if raw == "na" else int(raw)}
                for i, (p, raw) in enumerate(zip(prefs, raws), 1)]
    ints = [r["score"] for r in per_pref if isinstance(r["score"], int)]
    return PreferenceScore(sum(ints) / len(ints) if ints else None, per_pref)
