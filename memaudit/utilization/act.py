"""The `utilization` stage: Know vs Act for every bank entry scored in retrieve mode at k.

    Know   the entry's recovery score in retrieve mode at k is >= the threshold (0.75): no new call.
    Act    the assistant scaffold answers the entry's Act scenario twice, with the system's own
           context() and with no memory (the baseline: the same messages for every system, so the
           call cache shares it); a judge that is told the entry but not which answer is which is
           asked in both orders whether one answer is shaped by the entry in a way the other is not.
           Pass = both orders pick the memory answer; orders that disagree are a `disagree`, never
           a pass; identical answers fail without a judge call.
    Oracle a known entry that was not used (KP and not AP) is re-answered with evidence injected
           into the same context: the targeted episode's user turns (a pass -> `retrieval`: the
           evidence was not surfaced), else the bank's short value (a pass -> `comprehension`: it
           surfaced but was not understood), else `application`.

The memory is the run's final store, restored fresh for each entry; context() is asked with the
scenario before anything of it is stored, as a rollout's first turn reads memory with the task
before storing it (memaudit/rollout/episode.py: EpisodeMemory), so every system answers exactly as
it would at the start of a new conversation. One `act_cases` row
per (run, k, user, entry), written with the calls it used; existing rows are skipped (resume).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from memaudit.adapters.base import AgentContext
from memaudit.ask import ask
from memaudit.bench.act import ActScenario
from memaudit.bench.history import user_for_run
from memaudit.bench.instances import resolve_act_scenarios
from memaudit.errors import BadInput, ContextOverflow, InvalidOutput, failure_note
from memaudit.prompts import prompt_hashes
from memaudit.roles import ACT_JUDGE, AGENT, ROLE_SPECS, UTILIZATION_PHASE, prompts_of
from memaudit.rollout.assistant import reply
from memaudit.runtime import Runtime
from memaudit.scoring.jobs import run_all
from memaudit.scoring.recovery import open_memory
from memaudit.store import Run
from memaudit.store.utilization import ActCase, Utilization
from memaudit.types import CATEGORY_DEFINITIONS, DEFAULT_VARIANT, RUBRIC, BankEntry, Episode, MemoryItem, Reconstruction

KNOW_THRESHOLD = RUBRIC.recovered  # known = what attribution calls recovered
PROMPTS = (ROLE_SPECS[AGENT].prompt, *prompts_of(UTILIZATION_PHASE))  # the Act answers are the assistant's
MODEL_FAILURES = (InvalidOutput, ContextOverflow)  # an EndpointError ends the command
# What the judge's position answer means for each order of (memory answer, baseline).
PICKED = {"memory_first": {"first": "memory", "second": "baseline", "neither": "neither"},
          "baseline_first": {"first": "baseline", "second": "memory", "neither": "neither"}}
IDENTICAL = "the two answers are identical: nothing can be shaped by the entry in one and not the other"


class CaseFailed(Exception):
    """A model call of the case failed after the client's retries: the case is recorded as failed."""


def know_of(recon: Reconstruction, threshold: float) -> tuple[float | None, bool | None]:
    """(score, known): an overflow scores 0 and is not known; a failed judgment leaves Know open."""
    if recon.status == "failed" or recon.score is None:
        return None, None
    return recon.score, recon.score >= threshold


def disclosing_turns(episode: Episode | None) -> list[str]:
    """What the user said in the targeted episode after the task: the replies that could disclose
    the entry (the task itself is neutral by design; simulator placeholders are not the user)."""
    if episode is None:
        return []
    return [t.user_text for t in episode.turns if t.user_text and not t.fallback]


def with_notes(context: AgentContext, notes: list[str], tag: str) -> AgentContext:
    """The system's own context with extra notes after its own, shown the way memory notes are."""
    extra = [MemoryItem(f"{tag}-{i}", text) for i, text in enumerate(notes, 1)]
    return AgentContext(notes=[*context.notes, *extra], history=context.history, preamble=context.preamble,
                        dropped=context.dropped)


# -- the model calls of one case ---------------------------------------------------------------
async def _answer(rt: Runtime, scenario: ActScenario, context: AgentContext) -> str:
    """The scaffold's first reply to the scenario. The seed depends on the user and entry only, so
    the memory-backed, baseline and oracle answers differ by their context alone."""
    try:
        return await reply(rt.llm, scenario.text, [], context, seed_parts=(scenario.user_id, scenario.dimension, "act"))
    except MODEL_FAILURES as exc:
        raise CaseFailed(f"agent: {failure_note(exc)}") from None


async def judge_pair(rt: Runtime, entry: BankEntry, scenario: ActScenario, answer: str, baseline: str,
                     step: str) -> tuple[str, list[dict]]:
    """(outcome, verdicts) of the blind judge in both orders for `answer` against `baseline`."""
    if answer == baseline:
        return "fail", [{"order": "none", "note": IDENTICAL}]
    verdicts, picked = [], []
    for order in PICKED:
        first, second = (answer, baseline) if order == "memory_first" else (baseline, answer)
        try:
            result = await ask(rt.llm, ACT_JUDGE, seed_parts=(scenario.user_id, entry.dimension, step, order),
                               category=entry.category, definition=CATEGORY_DEFINITIONS[entry.category],
                               dimension=entry.dimension, short=entry.short, explanation=entry.explanation,
                               request=scenario.text, first=first, second=second)
        except MODEL_FAILURES as exc:
                raise CaseFailed(f"act_judge ({step}, {order}): {failure_note(exc)}") from None
        picked.append(PICKED[order][result.data["shaped"]])
        verdicts.append({"order": order, "shaped": result.data["shaped"], "picked": picked[-1],
                         "reason": result.data["reason"]})
    if picked[0] != picked[1]:
        return "disagree", verdicts
    return ("pass" if picked[0] == "memory" else "fail"), verdicts


async def oracle_chain(rt: Runtime, entry: BankEntry, scenario: ActScenario, context: AgentContext, baseline: str,
                       episode: Episode | None) -> tuple[str, list[dict]]:
    """(label, steps) for a known entry that was not used."""
    steps = []
    evidence = disclosing_turns(episode)
    if evidence:
        answer = await _answer(rt, scenario, with_notes(context, evidence, "episode-turn"))
        outcome, verdicts = await judge_pair(rt, entry, scenario, answer, baseline, "retrieval")
        steps.append({"step": "retrieval", "injected": evidence, "answer": answer, "act": outcome,
                      "verdicts": verdicts})
        if outcome == "pass":
            return "retrieval", steps
    else:
        steps.append({"step": "retrieval", "skipped": "the targeted episode has no user replies to inject"})
    answer = await _answer(rt, scenario, with_notes(context, [entry.short], "bank-value"))
    outcome, verdicts = await judge_pair(rt, entry, scenario, answer, baseline, "comprehension")
    steps.append({"step": "comprehension", "injected": [entry.short], "answer": answer, "act": outcome,
                  "verdicts": verdicts})
    return ("comprehension" if outcome == "pass" else "application"), steps


# -- one case ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ActTarget:
    run: Run
    k: int
    entry: BankEntry
    recon: Reconstruction
    scenario: ActScenario
    episode: Episode | None      # the entry's targeted episode in this run


async def system_context(rt: Runtime, target: ActTarget) -> AgentContext:
    """What the system shows the assistant on the first turn of the scenario's conversation: memory
    read with the scenario, which is not stored first (the rollout's order)."""
    memory = await open_memory(rt, target.run, target.recon.user_id, with_adapter=True)
    try:
        return await (await memory.opened()).context(target.scenario.text, target.k)
    finally:
        await memory.used()


async def run_case(rt: Runtime, target: ActTarget, threshold: float) -> ActCase:
    recon, entry, scenario = target.recon, target.entry, target.scenario
    score, known = know_of(recon, threshold)
    case = ActCase(recon.run, target.k, recon.user_id, entry.category, entry.dimension, score, known, scenario.text)
    try:
        context = await system_context(rt, target)
    except MODEL_FAILURES as exc:  # a memory-side call of the new task's first turn
        case.error = f"memory: {failure_note(exc)}"
        return case
    try:
        case.baseline = await _answer(rt, scenario, AgentContext())
        case.answer = await _answer(rt, scenario, context)
        case.act, case.verdicts = await judge_pair(rt, entry, scenario, case.answer, case.baseline, "act")
    except CaseFailed as exc:
        case.error = str(exc)
        return case
    case.status = "ok"
    if known and case.act != "pass":
        try:
            case.oracle, case.oracle_steps = await oracle_chain(rt, entry, scenario, context, case.baseline,
                                                                target.episode)
        except CaseFailed as exc:  # Act is decided; only the reason stays open
            case.error = f"oracle: {exc}"
    return case


async def _case_job(rt: Runtime, target: ActTarget, threshold: float) -> None:
    with rt.llm.collect() as uses:
        case = await run_case(rt, target, threshold)
    artifact = f"act:{case.k}:{case.user_id}:{case.dimension}"
    await rt.store.write([case.statement(), *rt.store.calls.use_statements(case.run, artifact, uses)])


# -- planning ------------------------------------------------------------------------------------
async def record_pass(rt: Runtime, run_id: str, k: int, threshold: float) -> None:
    """One pass per (run, k): a second invocation with another threshold would mix two definitions
    of Know in one set of rows, so it is refused."""
    config = {"threshold": threshold, "agent_model": rt.settings.role(AGENT).model,
              "judge_model": rt.settings.role(ACT_JUDGE).model,
              "prompts": prompt_hashes(PROMPTS, rt.settings.prompts_dir)}
    recorded = await rt.store.utilization.pass_config(run_id, k)
    if recorded is not None and recorded["threshold"] != threshold:
        raise BadInput(f"run {run_id!r} was measured at k={k} with threshold {recorded['threshold']}; "
                       "use that threshold, or measure another k", field="threshold")
    await rt.store.write([Utilization.pass_statement(run_id, k, config)])


async def plan_utilization(rt: Runtime, run_id: str, k: int, threshold: float) -> list:
    """The jobs of one run (none when it has no retrieve scores at k: nothing is known there)."""
    run = await rt.store.runs.require(run_id)
    recons = await rt.store.scores.load(run_id, "retrieve", k=k, variant=DEFAULT_VARIANT)
    if not recons:
        return []
    bench = await rt.store.benchmarks.load(run.bench)
    scenarios = await resolve_act_scenarios(rt.store, bench)
    if not scenarios:
        raise BadInput(f"benchmark {bench.name!r} has no Act scenarios; write them with "
                       f"`memaudit generate-act --bench {bench.name}`", field="bench")
    await record_pass(rt, run_id, k, threshold)
    have = await rt.store.utilization.case_keys(run_id, k)
    episodes = {(e.user_id, e.task_index): e for e in await rt.store.episodes.load(run_id)}
    last: dict[str, int] = {}
    for uid, index in episodes:
        last[uid] = max(last.get(uid, 0), index)
    users = {u.id: user_for_run(u, last[u.id]) for u in bench.users if u.id in last}  # the run's truth
    jobs = []
    for recon in recons:
        if (recon.user_id, recon.dimension) in have or not rt.shard.holds(run.system, recon.user_id):
            continue
        scenario = scenarios.get(recon.user_id, {}).get(recon.dimension)
        if scenario is None:
            raise BadInput(f"no Act scenario for {recon.dimension}; write them with "
                           f"`memaudit generate-act --bench {bench.name}`", user=recon.user_id, field="act_scenarios")
        entry = next((e for e in users[recon.user_id].bank if e.dimension == recon.dimension), None)
        if entry is None:  # not yet true when the run ended: no target of it
            continue
        task = next((t for t in bench.tasks.get(recon.user_id, ()) if t.target_dimension == recon.dimension), None)
        target = ActTarget(run, k, entry, recon, scenario, episodes.get((recon.user_id, task.index)) if task else None)
        jobs.append(partial(_case_job, rt, target, threshold))
    return jobs


async def utilization_runs(rt: Runtime, runs: list[str], *, k: int = 5, threshold: float = KNOW_THRESHOLD) -> list[str]:
    """Measure every run with retrieve scores at k, all cases in parallel; returns the runs measured."""
    if k < 1:
        raise BadInput("--k must be at least 1", field="k")
    if not 0.0 < threshold <= 1.0:
        raise BadInput("--threshold must be in (0, 1]", field="threshold")
    measured, jobs = [], []
    for run_id in runs:
        found = await plan_utilization(rt, run_id, k, threshold)
        if found or await rt.store.utilization.pass_config(run_id, k) is not None:
            measured.append(run_id)
        jobs += found
    await run_all(rt.store, jobs)
    return measured
