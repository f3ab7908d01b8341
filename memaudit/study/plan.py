"""`memaudit plan`: the calls, tokens and cost of a study before it runs.

A study's work comes in units: an episode (rollout), a target, i.e. a bank entry read in one mode
(score and attribute). The plan multiplies the study's units (users × tasks, users × bank entries ×
modes) by per-unit rates: calls of each role per unit, and tokens per call. The rates come from a
pilot store when one is given (`--from`: its rollout runs, per memory system; a system the pilot did
not run takes the pilot's average for the dialogue and scoring roles and the default for its memory
calls), and from DEFAULT_RATES otherwise. Calls are priced with the models the current settings send
each role to (`--judges` prices one recovery judge call per judge model).

The estimate of each run id is recorded in the store (`plans`), so that `memaudit cost` prints it
beside what the run used."""
from __future__ import annotations

from dataclasses import dataclass

from memaudit.errors import BadInput
from memaudit.roles import AGENT, DISCLOSURE, ELICITATION, MEMORY, ORACLE, PREF_JUDGE, RECOVERY_JUDGE, SIMULATOR, SLOT_FILL
from memaudit.study.cost import Priced, PriceList, Usage, call_role, stage_of

# The commands whose calls a plan estimates, each per unit of its work (an episode, a target); the
# recorded plan and `cost` report them as stages (`by_stage`).
PLANNED_COMMANDS = ("rollout", "score", "attribute")
# Per unit of its command: (calls, prompt tokens per call, completion tokens per call). Rough figures
# for a first estimate without a pilot: the published study's C ≈ 2.5 assistant replies per episode
# (one simulator and one preference-judge call each), prompts the size of a mid-length dialogue, and
# attribution asked for the ≈ 45 % of targets scored below 0.75. A pilot store replaces all of them.
DEFAULT_RATES = {
    "rollout": {AGENT: (2.5, 1500, 350), SIMULATOR: (2.5, 2200, 120), PREF_JUDGE: (2.5, 700, 80)},
    "score": {SLOT_FILL: (1.0, 2000, 40), RECOVERY_JUDGE: (1.0, 350, 40)},
    "attribute": {ORACLE: (0.45, 500, 60), DISCLOSURE: (0.4, 6000, 80), ELICITATION: (0.2, 6000, 80)},
}
# Memory calls per episode by system (their prompt and completion sizes: DEFAULT_MEMORY): systems that
# write verbatim call no model; A-Mem analyses and evolves each note, Mem0 extracts then decides,
# Mem-T forms and updates its collections.
DEFAULT_MEMORY_CALLS = {"nomem": 0.0, "longctx_full": 0.0, "bm25": 0.0, "amem": 6.0, "mem0": 5.0, "memt": 12.0}
DEFAULT_MEMORY = (3.0, 1200, 200)


@dataclass(frozen=True)
class Rate:
    """Per unit: calls; per call: prompt, provider-cached prompt, completion and reasoning tokens."""
    calls: float
    prompt: float
    cached: float = 0.0
    completion: float = 0.0
    reasoning: float = 0.0

    @classmethod
    def measured(cls, usage: Usage, units: int) -> "Rate":
        n = max(usage.calls, 1)
        return cls(usage.calls / units, usage.prompt / n, usage.cached / n, usage.completion / n, usage.reasoning / n)

    def usage(self, units: float, calls_factor: float = 1.0) -> Usage:
        calls = self.calls * units * calls_factor
        return Usage(round(calls), round(calls * self.prompt), round(calls * self.cached),
                     round(calls * self.completion), round(calls * self.reasoning))


def default_rates(system: str) -> dict[str, dict[str, Rate]]:
    rates = {stage: {role: Rate(c, p, 0.0, o) for role, (c, p, o) in roles.items()}
             for stage, roles in DEFAULT_RATES.items()}
    calls, prompt, completion = DEFAULT_MEMORY
    rates["rollout"][MEMORY] = Rate(DEFAULT_MEMORY_CALLS.get(system, calls), prompt, 0.0, completion)
    return rates


async def pilot_rates(store) -> dict[str, dict[str, dict[str, Rate]]]:
    """system -> stage -> role -> Rate, measured on the pilot store's rollout runs."""
    usage: dict[str, dict[str, dict[str, Usage]]] = {}
    units: dict[str, dict[str, int]] = {}
    for run in await store.runs.list():
        if run.origin != "rollout" or run.config.transcripts is not None:
            continue
        for stage, n in (await store.plans.units(run.run)).items():
            units.setdefault(run.system, {}).setdefault(stage, 0)
            units[run.system][stage] += n
        for r in await store.calls.run_call_usage(run.run):
            call = Usage(1, r["prompt_tokens"], r["cached_tokens"], r["completion_tokens"], r["reasoning_tokens"])
            by_stage = usage.setdefault(run.system, {}).setdefault(stage_of(r["artifact"]), {})
            by_stage.setdefault(call_role(r["role"]), Usage()).add(call)
    # A stage the pilot ran counts even without calls (nomem's reads of an empty memory call no model).
    return {system: {stage: {role: Rate.measured(u, n) for role, u in usage.get(system, {}).get(stage, {}).items()}
                     for stage, n in stages.items() if n}
            for system, stages in units.items()}


def rates_for(system: str, pilot: dict) -> tuple[dict[str, dict[str, Rate]], str]:
    """The rates of one system, and where they come from."""
    rates = default_rates(system)
    if system in pilot:
        rates.update(pilot[system])
        return rates, "pilot"
    if not pilot:
        return rates, "defaults"
    for command in PLANNED_COMMANDS:  # the pilot's mean over its systems, the memory calls excepted
        measured = [p[command] for p in pilot.values() if command in p]
        for role in {r for m in measured for r in m} - {MEMORY}:
            rates[command][role] = _mean([m[role] for m in measured if role in m], len(measured))
    return rates, "pilot (other systems) + default memory calls"


def _mean(found: list[Rate], systems: int) -> Rate:
    """Calls per unit over every measured system (one without the role made none); sizes per call
    over the systems that made such calls."""
    def per_call(name: str) -> float:
        return sum(getattr(r, name) for r in found) / len(found)

    return Rate(sum(r.calls for r in found) / systems, per_call("prompt"), per_call("cached"),
                per_call("completion"), per_call("reasoning"))


def study_units(bench, users: int, tasks: int | None, passes: int) -> dict[str, float]:
    """Units of one system's run over `users` users shaped like the benchmark's on average."""
    if not bench.users:
        raise BadInput(f"benchmark {bench.name!r} has no users", field="bench")
    per_user_tasks = sum(min(len(bench.tasks.get(u.id, ())), tasks or 10**9) for u in bench.users) / len(bench.users)
    per_user_bank = sum(len(u.bank) for u in bench.users) / len(bench.users)
    targets = users * per_user_bank * passes
    return {"rollout": users * per_user_tasks, "score": targets, "attribute": targets}


def estimate(units: dict[str, float], rates: dict, models: dict[str, list[str]], prices: PriceList) -> dict:
    """Calls, tokens and USD of one run: by stage and role, and in all."""
    whole, by_stage = Priced(), {}
    for command in PLANNED_COMMANDS:
        for role, rate in sorted(rates.get(command, {}).items()):
            for model in models.get(role) or ["?"]:
                usage = rate.usage(units.get(command, 0.0))
                if usage.calls == 0:
                    continue
                by_stage.setdefault(command, {}).setdefault(role, Priced()).add(model, usage, prices)
                whole.add(model, usage, prices)
    return {**whole.to_json(), "units": {k: round(v, 2) for k, v in units.items()},
            "by_stage": {s: {r: p.to_json() for r, p in roles.items()} for s, roles in by_stage.items()}}


async def plan_study(store, settings, bench, systems: list[str], *, users: int, tasks: int | None, modes: list[str],
                     ks: tuple[int, ...], judges: list[str] | None, pilot, prices: PriceList,
                     tag: str | None = None) -> dict[str, dict]:
    """The estimate of each run id of the study (recorded in `store`); `pilot` is a Store or None."""
    from memaudit.adapters.registry import get_adapter
    from memaudit.rollout.runner import run_id

    if users < 1:
        raise BadInput("--users must be at least 1", field="users")
    measured = await pilot_rates(pilot) if pilot is not None else {}
    out = {}
    for system in systems:
        retrieve = get_adapter(system).supports_retrieve
        passes = sum(len(ks) if m == "retrieve" else 1 for m in modes if m != "retrieve" or retrieve)
        rates, basis = rates_for(system, measured)
        models = {role: [settings.role(role).model] for stage in rates.values() for role in stage}
        if judges:
            models[RECOVERY_JUDGE] = list(judges)
        found = estimate(study_units(bench, users, tasks, passes), rates, models, prices)
        out[run_id(system, tag)] = {"system": system, "basis": basis, "users": users, "prices": prices.describe(),
                                    **found}
    await store.plans.save(out)
    return out
