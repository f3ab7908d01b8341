"""A judge panel: every target is graded by every panel judge (and, for test-retest, re-asked
with distinct seeds); the target's score is the median of the valid repeat-0 scores.

The one configured judge is a panel of one (`Panel.single`): the same call, the same key. Asked
once, it grades as a single judge always has: its verdict is the row's score and reason, and
neither verdict rows nor a panel are recorded for it, so stores scored before panels existed
replay identical. The panel settings are read here: from the command line (`--judges`,
`--repeats`), the config (`[roles.recovery_judge] models`; a judge's endpoint is a `[judges.NAME]`
section, config.Settings.panel_judge) and a recorded pass (`RECORDED`, what replay rebuilds).

An even panel is refused: its median could fall between two rubric levels. A judge that stays
invalid after the client's repair attempts is dropped for that target (its verdict is stored as
`failed`); when valid scores are left in an even number, the lower median keeps the score on the
rubric grid (docs/fidelity.md). All judges dropped: the target is a `failed` row, counted.
"""
from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass, replace

import anyio

from memaudit.config import PANEL_ROLE
from memaudit.errors import BadInput, ContextOverflow, EndpointError, InvalidOutput, failure_note
from memaudit.llm.batch import BatchPending
from memaudit.llm.client import LLM
from memaudit.prompts import Prompt
from memaudit.provenance import role_provenance
from memaudit.roles import ROLE_SPECS
from memaudit.ask import ask
from memaudit.types import Reconstruction

RECORDED = ("judges", "repeats")  # what a pass or a judge-check records of its panel


@dataclass(frozen=True)
class Verdict:
    judge: str
    repeat: int
    score: float | None
    reason: str | None
    status: str            # ok | failed (the judge is dropped for this target)
    error: str | None = None


@dataclass(frozen=True)
class PanelJudge:
    name: str
    llm: LLM


def panel_names(settings, judges: list[str] | None) -> list[str] | None:
    """The panel: `--judges` wins over `[roles.recovery_judge] models`; None = the one configured judge."""
    names = judges if judges is not None else settings.role_sections.get(PANEL_ROLE, {}).get("models")
    if names is None:
        return None
    names = list(names)
    if len(set(names)) != len(names):
        raise BadInput(f"a judge is named twice in the panel {', '.join(names)}", field="judges")
    if len(names) % 2 == 0:
        raise BadInput(f"a judge panel needs an odd number of judges for its median; got {len(names)} "
                       f"({', '.join(names)})", field="judges")
    return names


def judge_client(llm: LLM, name: str) -> LLM:
    """A client whose recovery_judge calls go to panel judge `name` (config.Settings.panel_judge)."""
    settings = llm.settings.panel_judge(name)
    if not settings.role(PANEL_ROLE).base_urls and settings.cache != "replay":
        raise BadInput(f"panel judge {name!r} needs an endpoint: give --base-url, a [roles.recovery_judge] "
                       f"base_url or a [judges.{name}] section in --config", field="judges")
    clone = copy.copy(llm)
    clone.settings = settings
    return clone


@dataclass(frozen=True)
class Panel:
    judges: tuple[PanelJudge, ...]
    repeats: int = 1
    named: bool = True  # False: the one configured judge (`single`), not a panel asked for by name

    @classmethod
    def build(cls, llm: LLM, judges: list[str] | None, repeats: int = 1) -> "Panel":
        """The panel named by `judges` (else by the config), or the one configured judge."""
        if repeats < 1:
            raise BadInput("--repeats must be at least 1", field="repeats")
        names = panel_names(llm.settings, judges)
        if names is None:
            return cls.single(llm, repeats)
        return cls(tuple(PanelJudge(n, judge_client(llm, n)) for n in names), repeats)

    @classmethod
    def single(cls, llm: LLM, repeats: int = 1) -> "Panel":
        """The one configured judge of `llm` as a panel of one."""
        return cls((PanelJudge(llm.settings.role(PANEL_ROLE).model, llm),), repeats, named=False)

    @classmethod
    def recorded(cls, llm: LLM, config: dict | None) -> "Panel":
        """The panel a scoring pass or judge-check recorded in its config (none: the one judge)."""
        found = recorded_fields(config or {})
        if not found.get("judges"):
            return cls.single(llm)
        return cls.build(llm, found["judges"], found.get("repeats", 1))

    def asking(self, judge: LLM) -> "Panel":
        """This panel with the one configured judge asked through `judge` (rescoring with another
        judge model); a panel of named judges is unchanged."""
        return self if self.named else Panel.single(judge, self.repeats)

    @property
    def solo(self) -> bool:
        """The one configured judge asked once: graded and recorded as a single judge."""
        return not self.named and self.repeats == 1

    @property
    def names(self) -> list[str]:
        return [j.name for j in self.judges]

    def describe(self) -> dict:
        """What a pass or a judge-check records of its panel (RECORDED)."""
        return {"judges": self.names, "repeats": self.repeats}

    def provenance(self) -> dict:
        """The model settings of each judge with a `[judges.NAME]` section, recorded as a role's are
        (no endpoint, no key): replay rebuilds the section from it. A judge without one is the
        recovery judge's recorded settings under its own model name, so it records nothing (and
        passes recorded before this stay byte-identical under replay and merge)."""
        spec = ROLE_SPECS[PANEL_ROLE]
        return {j.name: role_provenance(j.llm.settings, PANEL_ROLE, spec.temperature, spec.max_tokens) for j in self.judges
                if j.name in j.llm.settings.judge_sections}

    async def judge(self, recon: Reconstruction, prompt: Prompt) -> Reconstruction:
        """The row graded by the panel: the median score, and every verdict kept with the row (the
        one judge asked once: its verdict, and no verdict rows)."""
        verdicts = await self.verdicts(prompt, (recon.user_id, recon.dimension), dimension=recon.dimension,
                                       explanation=recon.explanation, ground_truth=recon.ground_truth,
                                       prediction=recon.label)
        if self.solo:
            only = verdicts[0]
            return replace(recon, score=only.score, judge_reason=only.reason, status=only.status, error=only.error)
        score, reason, error = panel_score(verdicts)
        return replace(recon, score=score, judge_reason=reason, status="ok" if error is None else "failed",
                       error=error, verdicts=tuple(verdicts))

    async def verdicts(self, prompt: Prompt, seed_parts: tuple, **values) -> list[Verdict]:
        """Every judge, every repeat, concurrently; in panel order, then repeat order."""
        found: dict[tuple[int, int], Verdict] = {}
        waiting: list[BatchPending] = []

        async def one(i: int, judge: PanelJudge, repeat: int) -> None:
            try:
                found[(i, repeat)] = await ask_judge(judge, prompt, seed_parts, repeat, **values)
            except BatchPending as pending:  # kept, not raised: it would cancel the other judges' calls
                waiting.append(pending)

        async with anyio.create_task_group() as tg:
            for i, judge in enumerate(self.judges):
                for repeat in range(self.repeats):
                    tg.start_soon(one, i, judge, repeat)
        if waiting:  # under --batch: every judge's call is recorded now; the target waits for them
            raise waiting[0]
        return [found[key] for key in sorted(found)]


async def ask_judge(judge: PanelJudge, prompt: Prompt, seed_parts: tuple, repeat: int, **values) -> Verdict:
    """One judge's verdict. Repeat 0 is asked exactly as a single judge is (same cache key); a
    re-ask adds its repeat number to the seed."""
    parts = seed_parts if repeat == 0 else (*seed_parts, f"repeat:{repeat}")
    try:
        answer = await ask(judge.llm, PANEL_ROLE, prompt=prompt, seed_parts=parts, **values)
    except (ContextOverflow, InvalidOutput) as exc:
        return Verdict(judge.name, repeat, None, None, "failed", failure_note(exc))
    except EndpointError as exc:  # judges share the role: the one whose endpoint is down is named
        raise EndpointError(f"panel judge {judge.name}: {exc.message}", status=exc.status, url=exc.url) from None
    return Verdict(judge.name, repeat, float(answer.data["score"]), answer.data["reason"], "ok")


def recorded_fields(config: dict) -> dict:
    """The panel fields of a recorded config (none for the one judge)."""
    return {name: config[name] for name in RECORDED if name in config}


def panel_score(verdicts: list[Verdict]) -> tuple[float | None, str | None, str | None]:
    """(score, reason, error) from the repeat-0 verdicts: the median of the valid scores (the lower
    one of the middle two when a judge was dropped from an odd panel), or no score when every
    judge was dropped."""
    first = [v for v in verdicts if v.repeat == 0]
    valid = [v for v in first if v.status == "ok"]
    if not valid:
        return None, None, f"every panel judge failed ({first[0].judge}: {first[0].error})"
    score = statistics.median_low(v.score for v in valid)
    chosen = next(v for v in valid if v.score == score)
    dropped = f", {len(first) - len(valid)} dropped" if len(valid) < len(first) else ""
    return score, f"panel median of {len(valid)}{dropped}; {chosen.judge}: {chosen.reason}", None
