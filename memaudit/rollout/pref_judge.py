"""The preference judge: rates one assistant reply against the user's assistance preferences.
A turn's score is the mean of the integer ratings; a turn with none (all `na`, no preferences,
or a judge failure) is unscorable (None), never 0."""
from __future__ import annotations

from dataclasses import dataclass, field

from memaudit.errors import ContextOverflow, InvalidOutput
from memaudit.llm.client import LLM
from memaudit.prompts import load_prompt
from memaudit.roles import ROLE_SPECS
from memaudit.types import BankEntry


@dataclass
class PreferenceScore:
    score: float | None
    per_pref: list[dict] = field(default_factory=list)  # {idx, dimension, score: int | "na" | None[, error]}


def render_preferences(prefs: list[BankEntry]) -> str:
    return "\n".join(f"[{i}] {p.dimension}: {p.short}. {p.explanation}" for i, p in enumerate(prefs, 1))


def _one_rating_each(count: int):
    def check(data) -> str | None:
        seen = [r["idx"] for r in data["ratings"]]
        if sorted(seen) != list(range(1, count + 1)):
            return f"give exactly one rating for each preference number 1 to {count} (got {seen})"
        return None
    return check


async def judge_reply(llm: LLM, prefs: list[BankEntry], task: str, reply: str, *,
                      seed_parts: tuple) -> PreferenceScore:
    if not prefs:
        return PreferenceScore(None)
    spec = ROLE_SPECS["pref_judge"]
    messages = load_prompt(spec.prompt, llm.settings.prompts_dir).render(
        preferences=render_preferences(prefs), count=len(prefs), task=task, reply=reply)
    try:
        result = await llm.call("pref_judge", messages, temperature=spec.temperature, max_tokens=spec.max_tokens,
                                schema=spec.schema, check=_one_rating_each(len(prefs)), seed_parts=seed_parts)
    except (InvalidOutput, ContextOverflow) as exc:
        # A judge that could not answer leaves the turn unscorable; the failure stays visible.
        return PreferenceScore(None, [{"idx": i, "dimension": p.dimension, "score": None, "error": str(exc)}
                                      for i, p in enumerate(prefs, 1)])
    by_idx = {r["idx"]: r["score"] for r in result.data["ratings"]}
    per_pref = []
    for i, p in enumerate(prefs, 1):
        raw = by_idx[i]
        per_pref.append({"idx": i, "dimension": p.dimension, "score": raw if raw == "na" else int(raw)})
    ints = [r["score"] for r in per_pref if isinstance(r["score"], int)]
    return PreferenceScore(sum(ints) / len(ints) if ints else None, per_pref)
