"""Failure attribution (PROTOCOL §6): which arrow of expose -> collect -> recover lost a target.

    score >= 0.75                     -> ok
    overflow                          -> overflow
    no task targets the dimension, or its task never ran in the run (a partial rollout)
                                      -> no_targeted_task
    Stage 0 oracle says the task cannot invite the value   -> task_design_failure
    Stage 1 the targeted episode disclosed it              -> memory_failure
    Stage 2 who stalled               -> agent_elicitation_failure | simulator_too_strict
    a stage that fails                -> unclassified (the error in the note)
    a failed reconstruction           -> unclassified (noted)

The oracle sees only the task text, dimension, short and explanation, so one verdict (one model
call) is shared by every system and mode; verdicts are recorded in the `oracle` table keyed by
(bench, user, dimension, task-text hash). Evidence quotes and reasons of every stage are kept in `stages`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from memaudit.errors import ContextOverflow, InvalidOutput
from memaudit.llm.cache import text_hash
from memaudit.roles import ask
from memaudit.runtime import Runtime
from memaudit.scoring.recovery import check_options, failure_note, run_all
from memaudit.types import DEFAULT_VARIANT, Attribution, Episode, Reconstruction, Task

RECOVERED = 0.75
STAGE_FAILURES = (ContextOverflow, InvalidOutput)  # an EndpointError ends the command
BATCH_ROLES = ("oracle", "disclosure", "elicitation")  # the calls `attribute --batch` sends in batches


class StageFailed(Exception):
    """A stage's model call failed after the client's retries: the target is unclassified."""


@dataclass(frozen=True)
class Target:
    bench: str
    recon: Reconstruction
    task: Task | None          # the task whose target_dimension is this dimension
    episode: Episode | None    # its episode in this run


def transcript(episode: Episode) -> str:
    lines = [f"User: {episode.task}"]
    for turn in episode.turns:
        lines.append(f"Assistant: {turn.assistant}")
        if turn.user_text:
            lines.append(f"User: {turn.user_text}")
    return "\n".join(lines)


async def _ask(rt: Runtime, role: str, seed_parts: tuple, **values) -> dict:
    try:
        return (await ask(rt.llm, role, seed_parts=seed_parts, **values)).data
    except STAGE_FAILURES as exc:
        raise StageFailed(failure_note(exc)) from None


def _about(recon: Reconstruction) -> dict:
    return {"category": recon.category, "dimension": recon.dimension, "ground_truth": recon.ground_truth,
            "explanation": recon.explanation}


async def oracle_verdict(rt: Runtime, bench: str, recon: Reconstruction, task: Task) -> dict:
    """Stage 0. Its seed and prompt depend only on the user, dimension, target and task text, so
    the call cache (and single-flight) make one model call serve every system and mode. Each run
    still goes through the client, never straight to the oracle table, so every run that uses the
    verdict is charged its tokens whatever order the runs were attributed in (replay compares
    token usage); the table is the shared record of the verdicts."""
    task_hash = text_hash(task.text)
    data = await _ask(rt, "oracle", (recon.user_id, recon.dimension, task_hash), task=task.text, **_about(recon))
    await rt.store.write([rt.store.attributions.oracle_statement(bench, recon.user_id, recon.dimension, task_hash,
                                                                 data["can_invite"], data["reason"])])
    return data


async def classify(rt: Runtime, target: Target, stages: list) -> tuple[str, str]:
    """(label, note) of a target below the recovery threshold; `stages` collects each verdict."""
    recon = target.recon
    if recon.status == "overflow":
        return "overflow", recon.error or ""
    if recon.status == "failed":
        return "unclassified", f"reconstruction failed: {recon.error}"
    if target.task is None:
        return "no_targeted_task", ""
    if target.episode is None:  # scored with --dims all after a partial rollout: no task played
        return "no_targeted_task", f"the targeted task {target.task.index} never ran in this run"
    try:
        verdict = await oracle_verdict(rt, target.bench, recon, target.task)
        stages.append({"stage": 0, "name": "oracle", **verdict})
        if not verdict["can_invite"]:
            return "task_design_failure", ""
        text = transcript(target.episode)
        seed = (recon.user_id, recon.dimension)
        disclosed = await _ask(rt, "disclosure", seed, transcript=text, **_about(recon))
        stages.append({"stage": 1, "name": "disclosure", **disclosed})
        if disclosed["disclosed"]:
            return "memory_failure", ""
        stalled = await _ask(rt, "elicitation", seed, transcript=text, **_about(recon))
        stages.append({"stage": 2, "name": "elicitation", **stalled})
        return stalled["label"], ""
    except StageFailed as exc:
        return "unclassified", str(exc)


async def _attribute(rt: Runtime, target: Target) -> None:
    recon = target.recon
    stages: list = []
    with rt.llm.collect() as uses:
        if recon.status == "ok" and recon.score >= RECOVERED:
            label, note = "ok", ""
        else:
            label, note = await classify(rt, target, stages)
    row = Attribution(recon.run, recon.mode, recon.k, recon.variant, recon.user_id, recon.category, recon.dimension,
                      label, recon.score, stages, target.task.index if target.task else None, note)
    artifact = f"attr:{recon.mode}:{recon.k}:{recon.variant}:{recon.user_id}:{recon.dimension}"
    rt.store.write_later([rt.store.attributions.statement(row),
                          *rt.store.calls.use_statements(recon.run, artifact, uses)])
    await rt.store.maybe_flush()


async def plan_attribution(rt: Runtime, run_id: str, modes) -> list:
    run = await rt.store.runs.require(run_id)
    bench = await rt.store.benchmarks.load(run.bench)
    have = await rt.store.attributions.keys(run_id, DEFAULT_VARIANT)
    episodes = {(e.user_id, e.task_index): e for e in await rt.store.episodes.load(run_id)}
    jobs = []
    for mode in modes:
        for recon in await rt.store.scores.load(run_id, mode, variant=DEFAULT_VARIANT):
            if (recon.mode, recon.k, recon.user_id, recon.dimension) in have \
                    or not rt.shard.holds(run.system, recon.user_id):
                continue
            task = next((t for t in bench.tasks.get(recon.user_id, ()) if t.target_dimension == recon.dimension), None)
            episode = episodes.get((recon.user_id, task.index)) if task else None
            jobs.append(partial(_attribute, rt, Target(run.bench, recon, task, episode)))
    return jobs


async def attribute_runs(rt: Runtime, runs, modes) -> None:
    """Attribute every scored target of the default variant, per access mode (and k), in parallel."""
    check_options(modes, "all")
    jobs = []
    for run_id in runs:
        jobs += await plan_attribution(rt, run_id, modes)
    await run_all(rt.store, jobs)
