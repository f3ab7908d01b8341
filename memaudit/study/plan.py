"""`memaudit plan`: the calls, tokens and cost of a study before it runs.

A study (`Study`) is the flags of the commands it runs: rollout's benchmark, systems, users, tasks
and turns, score's modes, k, dims, judges and repeats, and which stages run. Its work comes in
units: an episode (rollout), a target, i.e. a bank entry read in one mode and k (score and
attribute). The units are counted on the benchmark's own users as the commands would choose them
(the first T tasks of each; `--dims targeted`: only the entries those tasks target), and a count of
users beyond the benchmark's adds users shaped like its average. The plan multiplies the units by
per-unit rates: calls of each role per unit, and tokens per call. The rates come from a pilot store
when one is given (`--from`: its rollout runs, per memory system; a system the pilot did not run
takes the pilot's average for the dialogue and scoring roles and the default for its memory calls),
and from DEFAULT_RATES otherwise. A recovery judge's rate is per judge and repeat: a pilot scored by
a panel is measured per judge asked, and the study's panel (`--judges`, `--repeats`) multiplies it
back. Calls are priced with the models the current settings send each role to.

The estimate of each run id is recorded in the store (`plans`), so that `memaudit cost` prints it
beside what the run used."""
from __future__ import annotations

from dataclasses import dataclass

from memaudit.errors import BadInput, MemauditError
from memaudit.roles import AGENT, MEMORY, PREF_JUDGE, RECOVERY_JUDGE, SIMULATOR
from memaudit.stages import EPISODE, PLANNED, ROLLOUT, SCORE, TARGET
from memaudit.study.cost import Priced, PriceList, Usage, call_role, call_usage, stage_of
from memaudit.types import DEFAULT_VARIANT

# Per unit of its stage: (calls, prompt tokens per call, completion tokens per call), each planned
# stage's first estimate without a pilot (memaudit/stages.py `Stage.rates`). A pilot store replaces them.
DEFAULT_RATES = {stage.name: stage.rates for stage in PLANNED}
# Memory calls per episode of memaudit's own systems (their prompt and completion sizes:
# DEFAULT_MEMORY): systems that write verbatim call no model; A-Mem analyses and evolves each note,
# Mem0 extracts then decides, Mem-T forms and updates its collections. A deployed library declares
# its calls per user message (adapters/deployed.py `CALLS_PER_MESSAGE`), and an episode gives it the
# task text and one user message per assistant reply.
DEFAULT_MEMORY_CALLS = {"nomem": 0.0, "longctx_full": 0.0, "bm25": 0.0, "amem": 6.0, "mem0": 5.0, "memt": 12.0}
DEFAULT_MEMORY = (3.0, 1200, 200)
# The commands of a study, in order: what `plan --stages` picks, each estimated per unit of its work.
STUDY_COMMANDS = tuple(stage.name for stage in PLANNED)
DIALOGUE = (AGENT, SIMULATOR, PREF_JUDGE)  # one call each per assistant reply
JUDGE = RECOVERY_JUDGE  # asked once per target by each panel judge, `repeats` times


@dataclass(frozen=True)
class Study:
    """The flags of a study, as `rollout`, `score` and `attribute` take them (and `plan`, which
    estimates them and writes the job scripts that run them)."""
    bench: str
    systems: tuple[str, ...]
    users: str | None = None  # rollout's --users: a count (`3`) or ids (`user_001,user_004`); None: all
    tasks: int | None = None
    max_turns: int = 25
    tag: str | None = None
    modes: tuple[str, ...] = ("dump_all", "retrieve")
    ks: tuple[int, ...] = (5,)
    dims: str = "all"
    judges: tuple[str, ...] | None = None
    repeats: int = 1
    stages: tuple[str, ...] = STUDY_COMMANDS


@dataclass(frozen=True)
class Rate:
    """Per unit: calls; per call: prompt, provider-cached prompt, completion and reasoning tokens.
    `unknown` says why the sizes are unknown (every pilot call of the role lacked token counts)."""
    calls: float
    prompt: float
    cached: float = 0.0
    completion: float = 0.0
    reasoning: float = 0.0
    unknown: str | None = None

    @classmethod
    def measured(cls, usage: Usage, units: int, unknown: str | None = None) -> "Rate":
        """Calls per unit of every pilot call; sizes per call of those whose tokens are known."""
        n = max(usage.calls - usage.unknown, 1)
        why = unknown if usage.calls and usage.unknown == usage.calls else None
        return cls(usage.calls / units, usage.prompt / n, usage.cached / n, usage.completion / n, usage.reasoning / n,
                   why)

    def usage(self, units: float, calls_factor: float = 1.0) -> Usage:
        calls = self.calls * units * calls_factor
        return Usage(round(calls), round(calls * self.prompt), round(calls * self.cached),
                     round(calls * self.completion), round(calls * self.reasoning),
                     round(calls) if self.unknown else 0)


def default_rates(system: str, max_turns: int = 25) -> dict[str, dict[str, Rate]]:
    """The documented defaults; an episode has no more assistant replies than `max_turns`."""
    rates = {stage: {role: Rate(min(c, max_turns) if role in DIALOGUE else c, p, 0.0, o)
                     for role, (c, p, o) in roles.items()}
             for stage, roles in DEFAULT_RATES.items()}
    _, prompt, completion = DEFAULT_MEMORY
    rates[ROLLOUT.name][MEMORY] = Rate(memory_calls(system, rates[ROLLOUT.name][AGENT].calls), prompt, 0.0,
                                       completion)
    return rates


def memory_calls(system: str, replies: float) -> float:
    """Memory calls per episode of `replies` assistant replies: what the system's adapter declares
    per user message (the task text and each reply's answer), else the defaults above."""
    from memaudit.adapters.registry import get_adapter

    try:
        per_message = getattr(get_adapter(system), "CALLS_PER_MESSAGE", None)
    except MemauditError:  # unknown here, or its library missing: the plan still says something
        per_message = None
    if per_message is None:
        return DEFAULT_MEMORY_CALLS.get(system, DEFAULT_MEMORY[0])
    return per_message * (1 + replies)


async def pilot_rates(store) -> dict[str, dict[str, dict[str, Rate]]]:
    """system -> stage -> role -> Rate, measured on the pilot store's rollout runs (the recovery
    judge's per judge asked: `judge_asks`)."""
    usage: dict[str, dict[str, dict[str, Usage]]] = {}
    unknown: dict[tuple[str, str, str], str] = {}  # (system, stage, role) -> why some call's tokens are unknown
    units: dict[str, dict[str, int]] = {}
    asks: dict[str, list[int]] = {}
    for run in await store.runs.list():
        if run.origin != "rollout" or run.config.transcripts is not None:
            continue
        for stage, n in (await store.plans.units(run.run)).items():
            units.setdefault(run.system, {}).setdefault(stage, 0)
            units[run.system][stage] += n
        asks.setdefault(run.system, []).append(await judge_asks(store, run.run))
        for r in await store.calls.run_call_usage(run.run):
            call, why = call_usage(r)
            stage, role = stage_of(r["artifact"]), call_role(r["role"])
            usage.setdefault(run.system, {}).setdefault(stage, {}).setdefault(role, Usage()).add(call)
            if why:
                unknown.setdefault((run.system, stage, role), why)
    # A stage the pilot ran counts even without calls (nomem's reads of an empty memory call no model).
    return {system: {stage: {role: Rate.measured(u, n * (max(asks[system]) if role == JUDGE else 1),
                                                 unknown.get((system, stage, role)))
                             for role, u in usage.get(system, {}).get(stage, {}).items()}
                     for stage, n in stages.items() if n}
            for system, stages in units.items()}


async def judge_asks(store, run: str) -> int:
    """Recovery judge calls per target in a run's scoring: its panel's judges times repeats (one
    judge, once: 1)."""
    found = [p.config.scorer for p in await store.scores.passes(run, DEFAULT_VARIANT)]
    return max((len(s.get("judges") or [None]) * int(s.get("repeats", 1)) for s in found), default=1)


def rates_for(system: str, pilot: dict, max_turns: int = 25) -> tuple[dict[str, dict[str, Rate]], str]:
    """The rates of one system, and where they come from."""
    rates = default_rates(system, max_turns)
    if system in pilot:
        rates.update(pilot[system])
        return rates, "pilot"
    if not pilot:
        return rates, "defaults"
    for stage in STUDY_COMMANDS:  # the pilot's mean over its systems, the memory calls excepted
        measured = [p[stage] for p in pilot.values() if stage in p]
        for role in {r for m in measured for r in m} - {MEMORY}:
            rates[stage][role] = _mean([m[role] for m in measured if role in m], len(measured))
    return rates, "pilot (other systems) + default memory calls"


def _mean(found: list[Rate], systems: int) -> Rate:
    """Calls per unit over every measured system (one without the role made none); sizes per call
    over the systems that made such calls with known tokens."""
    calls = sum(r.calls for r in found) / systems
    known = [r for r in found if r.unknown is None]
    if not known:  # no system measured a size: the mean's are unknown too
        return Rate(calls, 0.0, unknown=found[0].unknown)

    def per_call(name: str) -> float:
        return sum(getattr(r, name) for r in known) / len(known)

    return Rate(calls, per_call("prompt"), per_call("cached"), per_call("completion"), per_call("reasoning"))


def study_users(bench, spec: str | None) -> tuple[list, int]:
    """The benchmark's users a study plays (rollout's `--users`: a count, ids, or all), and how many
    users shaped like their average a count beyond the benchmark's adds."""
    if not bench.users:
        raise BadInput(f"benchmark {bench.name!r} has no users", field="bench")
    spec = (spec or "").strip()
    if spec.isdigit():
        count = int(spec)
        if count < 1:
            raise BadInput("--users must be at least 1", field="users")
        return list(bench.users[:count]), max(0, count - len(bench.users))
    if not spec:
        return list(bench.users), 0
    by_id = {u.id: u for u in bench.users}
    ids = list(dict.fromkeys(part.strip() for part in spec.split(",") if part.strip()))
    unknown = [u for u in ids if u not in by_id]
    if unknown:
        raise BadInput(f"unknown users {unknown} in benchmark {bench.name}", field="users")
    return [by_id[u] for u in ids], 0


def study_units(bench, study: Study, passes: int) -> dict[str, float]:
    """Units of one system's run: the episodes and the targets of the study's users, as rollout and
    score choose them (the first `tasks` tasks; `--dims targeted`: the entries those tasks target)."""
    users, extra = study_users(bench, study.users)
    episodes, targets = [], []
    for user in users:
        tasks = bench.tasks.get(user.id, ())[:study.tasks]
        ran = {t.target_dimension for t in tasks}
        episodes.append(len(tasks))
        targets.append(len(user.bank) if study.dims == "all" else sum(e.dimension in ran for e in user.bank))
    shaped = (len(users) + extra) / len(users)  # users beyond the benchmark's: like its average
    per_unit = {EPISODE: sum(episodes) * shaped, TARGET: sum(targets) * passes * shaped}
    return {stage.name: per_unit[stage.unit.kind] for stage in PLANNED}


def estimate(units: dict[str, float], rates: dict, models: dict[str, list[str]], prices: PriceList,
             factors: dict[str, float] | None = None) -> dict:
    """Calls, tokens and USD of one run: by stage and role, and in all. Each model of a role is
    asked at the role's rate (a panel's judges each grade every target), times the role's factor."""
    whole, by_stage = Priced(), {}
    for stage in STUDY_COMMANDS:
        for role, rate in sorted(rates.get(stage, {}).items()):
            for model in models.get(role) or ["?"]:
                usage = rate.usage(units.get(stage, 0.0), (factors or {}).get(role, 1.0))
                if usage.calls == 0:
                    continue
                why = rate.unknown and f"the pilot's {role} calls have no token counts ({rate.unknown})"
                by_stage.setdefault(stage, {}).setdefault(role, Priced()).add(model, usage, prices, why)
                whole.add(model, usage, prices, why)
    return {**whole.to_json(), "units": {k: round(v, 2) for k, v in units.items()},
            "by_stage": {s: {r: p.to_json() for r, p in roles.items()} for s, roles in by_stage.items()}}


async def plan_study(store, settings, bench, study: Study, *, pilot, prices: PriceList) -> dict[str, dict]:
    """The estimate of each run id of the study (recorded in `store`); `pilot` is a Store or None."""
    from memaudit.adapters.registry import get_adapter
    from memaudit.rollout.runner import run_id

    judges = study_panel(settings, study)
    measured = await pilot_rates(pilot) if pilot is not None else {}
    differs = await pilot_differences(pilot, study, settings) if pilot is not None else []
    out = {}
    for system in study.systems:
        retrieve = get_adapter(system).supports_retrieve
        passes = sum(len(study.ks) if m == "retrieve" else 1 for m in study.modes if m != "retrieve" or retrieve)
        rates, basis = rates_for(system, measured, study.max_turns)
        rates = {stage: roles for stage, roles in rates.items() if stage in study.stages}
        models = {role: [settings.role(role).model] for stage in rates.values() for role in stage}
        if judges:
            models[JUDGE] = list(judges)
        found = estimate(study_units(bench, study, passes), rates, models, prices, {JUDGE: study.repeats})
        out[run_id(system, study.tag)] = {"system": system, "basis": basis, "study": study_json(study),
                                          "pilot_differs": differs, "prices": prices.describe(), **found}
    await store.plans.save(out)
    return out


def study_panel(settings, study: Study) -> list[str] | None:
    """The study's judge panel (None: the one configured judge), refused as `score` refuses it."""
    from memaudit.scoring.panel import panel_names

    if study.repeats < 1:
        raise BadInput("--repeats must be at least 1", field="repeats")
    return panel_names(settings, list(study.judges) if study.judges is not None else None)


async def pilot_differences(pilot, study: Study, settings) -> list[str]:
    """The flags that set a per-unit rate (turns per episode, which targets are scored) where the
    pilot's runs were made otherwise than the study asks, and the models its rollout roles ran on
    where they are not the ones the plan prices (a pilot on the fake model has its token counts)."""
    turns, dims, models = set(), set(), set()
    for run in await pilot.runs.list():
        if run.origin == "rollout" and run.config.transcripts is None:
            turns.add(run.config.max_turns)
            dims.update(p.config.dims for p in await pilot.scores.passes(run.run, DEFAULT_VARIANT))
            roles = (run.config.provenance or {}).get("roles", {})
            models.update((sent["model"], settings.role(role).model) for role, sent in roles.items()
                          if sent.get("model") != settings.role(role).model)
    found = [f"--max-turns {t}" for t in sorted(turns - {study.max_turns})]
    found += [f"--dims {d}" for d in sorted(dims - {study.dims}) if SCORE.name in study.stages]
    if models:
        found.append(f"model {', '.join(sorted({m for m, _ in models}))} where the plan prices "
                     f"{', '.join(sorted({m for _, m in models}))}")
    return found


def study_json(study: Study) -> dict:
    """The flags a plan was made for, recorded with its estimate."""
    return {name: list(v) if isinstance(v, tuple) else v for name, v in vars(study).items()}
