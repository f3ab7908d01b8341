"""Failure attribution (PROTOCOL §6): which arrow of expose -> collect -> recover lost a target.

    recovered (types.RUBRIC)          -> ok
    overflow                          -> overflow (the steps still run: see below)
    no task targets the dimension, or its task never ran in the run (a partial rollout)
                                      -> no_targeted_task
    step 0 oracle says the task cannot invite the value   -> task_design_failure
    step 1 the targeted episode disclosed it              -> memory_failure
    step 2 who stalled                -> agent_elicitation_failure | simulator_too_strict
    a step that fails                 -> unclassified (the error in the note)
    a failed reconstruction           -> unclassified (noted; the steps still run: see below)

The steps are PROTOCOL §6's "Stage 0-2"; here they are steps, as "stage" names a command of the
pipeline (memaudit/stages.py). What is stored keeps its names: an attribution's `stages` (one entry
per step, `{"stage": n, "name": …}`, as the release writes them) and a pass's `failed_stages`.

An `overflow` target keeps its own label, and so does a `failed` one (its reader or judge never gave
a valid answer); both are also run through the steps as the published runner did (it scored such
a target 0): memaudit/tables/metrics.py `published_label` reads from them the label the published
code would have given, for Table 4's `published_equivalent`. Attribution passes recorded before
failed targets went through the steps say so (no `failed_stages` in their config), and replay
re-executes them that way.

The oracle sees only the task text, dimension, short and explanation, so one verdict (one model
call) is shared by every system and mode; verdicts are recorded in the `oracle` table keyed by
(bench, user, dimension, task-text hash). A verdict imported with a published release is used as
it is, without a call, as the published runner reused its oracle cache. Evidence quotes and
reasons of every step are kept in `stages`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from memaudit.ask import ask
from memaudit.errors import ContextOverflow, InvalidOutput, failure_note
from memaudit.llm.keys import text_hash
from memaudit.provenance import PROTOCOL_VERSION, prompts_provenance, role_provenance
from memaudit.roles import DISCLOSURE, ELICITATION, ORACLE, ROLE_SPECS
from memaudit.runtime import Runtime
from memaudit.scoring.jobs import run_all
from memaudit.scoring.recovery import check_options, pass_variant
from memaudit.types import RUBRIC, Attribution, Episode, Reconstruction, Task

STEP_ROLES = (ORACLE, DISCLOSURE, ELICITATION)
STEP_FAILURES = (ContextOverflow, InvalidOutput)  # an EndpointError ends the command
ROLES_CALLED = STEP_ROLES  # the roles attribution calls
# The pass config's field saying failed reconstructions went through the steps (its stored name).
FAILED_STEPS = "failed_stages"


class StepFailed(Exception):
    """A step's model call failed after the client's retries: the target is unclassified."""


@dataclass(frozen=True)
class Target:
    bench: str
    recon: Reconstruction
    task: Task | None          # the task whose target_dimension is this dimension
    episode: Episode | None    # its episode in this run


# The step-2 answer: which side stalled, as a letter (the published answer format).
ELICITATION_LABELS = {"A": "agent_elicitation_failure", "B": "simulator_too_strict"}
EMPTY_TRANSCRIPT = "(empty)"


def transcript(episode: Episode) -> str:
    """The episode's turns as the steps read them, task excluded (it is its own value): one
    "Agent: …" and one "User: …" line per turn, empty texts left out, as the published runner."""
    lines = []
    for turn in episode.turns:
        if turn.assistant:
            lines.append(f"Agent: {turn.assistant}")
        if turn.user_text:
            lines.append(f"User: {turn.user_text}")
    return "\n".join(lines) or EMPTY_TRANSCRIPT


async def _ask(rt: Runtime, role: str, seed_parts: tuple, **values) -> dict:
    try:
        return (await ask(rt.llm, role, seed_parts=seed_parts, **values)).data
    except STEP_FAILURES as exc:
        raise StepFailed(failure_note(exc)) from None


def _about(recon: Reconstruction, task: Task) -> dict:
    """The values every step's prompt may use (the published steps use all but the category)."""
    return {"category": recon.category, "dimension": recon.dimension, "ground_truth": recon.ground_truth,
            "explanation": recon.explanation, "task": task.text}


async def oracle_verdict(rt: Runtime, bench: str, recon: Reconstruction, task: Task) -> dict:
    """Step 0. Its seed and prompt depend only on the user, dimension, target and task text, so
    the call cache (and single-flight) make one model call serve every system and mode. Each run
    still goes through the client, never straight to the oracle table, so every run that uses the
    verdict is charged its tokens whatever order the runs were attributed in (replay compares
    token usage); the table is the shared record of the verdicts. A verdict imported with a
    release (`imported_oracle`, an input replay copies) is used without a call."""
    task_hash = text_hash(task.text)
    imported = await rt.store.attributions.imported_oracle(bench, recon.user_id, recon.dimension, task_hash)
    if imported is not None:
        return imported
    data = await _ask(rt, ORACLE, (recon.user_id, recon.dimension, task_hash), **_about(recon, task))
    await rt.store.write([rt.store.attributions.oracle_statement(bench, recon.user_id, recon.dimension, task_hash,
                                                                 data["can_invite"], data["reason"])])
    return data


async def classify(rt: Runtime, target: Target, steps: list, failed_steps: bool = True) -> tuple[str, str]:
    """(label, note) of a target below the recovery threshold; `steps` collects each verdict. An
    overflowing or failed reconstruction keeps its own label whatever its steps say."""
    recon = target.recon
    failed = ("unclassified", f"reconstruction failed: {recon.error}")
    if recon.status == "failed" and not failed_steps:
        return failed
    if target.task is None:
        label, note = "no_targeted_task", ""
    elif target.episode is None:  # scored with --dims all after a partial rollout: no task played
        label, note = "no_targeted_task", f"the targeted task {target.task.index} never ran in this run"
    else:
        label, note = await run_steps(rt, target, steps)
    if recon.status == "overflow":
        return "overflow", recon.error or ""
    return failed if recon.status == "failed" else (label, note)


async def run_steps(rt: Runtime, target: Target, steps: list) -> tuple[str, str]:
    """Steps 0-2 of a target whose targeted task ran."""
    recon, task = target.recon, target.task
    try:
        verdict = await oracle_verdict(rt, target.bench, recon, task)
        steps.append({"stage": 0, "name": ORACLE, **verdict})
        if not verdict["can_invite"]:
            return "task_design_failure", ""
        values = {**_about(recon, task), "transcript": transcript(target.episode)}
        seed = (recon.user_id, recon.dimension)
        disclosed = await _ask(rt, DISCLOSURE, seed, **values)
        steps.append({"stage": 1, "name": DISCLOSURE, **disclosed})
        if disclosed["disclosed"]:
            return "memory_failure", ""
        stalled = await _ask(rt, ELICITATION, seed, **values)
        label = ELICITATION_LABELS[stalled["category"]]
        steps.append({"stage": 2, "name": ELICITATION, "label": label, **stalled})
        return label, ""
    except StepFailed as exc:
        return "unclassified", str(exc)


async def _attribute(rt: Runtime, target: Target, failed_steps: bool) -> None:
    recon = target.recon
    steps: list = []
    with rt.llm.collect() as uses:
        if recon.status == "ok" and RUBRIC.is_recovered(recon.score):
            label, note = "ok", ""
        else:
            label, note = await classify(rt, target, steps, failed_steps)
    row = Attribution(recon.run, recon.mode, recon.k, recon.variant, recon.user_id, recon.category, recon.dimension,
                      label, recon.score, steps, target.task.index if target.task else None, note)
    artifact = f"attr:{recon.mode}:{recon.k}:{recon.variant}:{recon.user_id}:{recon.dimension}"
    rt.store.write_later([rt.store.attributions.statement(row),
                          *rt.store.calls.use_statements(recon.run, artifact, uses)])
    await rt.store.maybe_flush()


def attribution_provenance(rt: Runtime, failed_steps: bool) -> dict:
    """What an attribution pass runs with: the prompt directory, the step roles' sending and
    whether failed reconstructions go through the steps (FAILED_STEPS, recorded when they do)."""
    return {"prompts": prompts_provenance(rt.settings.prompts_dir), "protocol": PROTOCOL_VERSION,
            **({FAILED_STEPS: True} if failed_steps else {}),
            "roles": {role: role_provenance(rt.settings, role, ROLE_SPECS[role].temperature,
                                            ROLE_SPECS[role].max_tokens) for role in STEP_ROLES}}


async def plan_attribution(rt: Runtime, run_id: str, modes, failed_steps: bool) -> list:
    run = await rt.store.runs.require(run_id)
    bench = await rt.store.benchmarks.load(run.bench)
    variant = await pass_variant(rt, run_id)
    have = await rt.store.attributions.keys(run_id, variant)
    episodes = {(e.user_id, e.task_index): e for e in await rt.store.episodes.load(run_id)}
    jobs = []
    for mode in modes:
        recons = await rt.store.scores.load(run_id, mode, variant=variant)
        for k in sorted({r.k for r in recons}):
            await rt.store.attributions.record_pass(run_id, mode, k, variant,
                                                    attribution_provenance(rt, failed_steps))
        for recon in recons:
            if (recon.mode, recon.k, recon.user_id, recon.dimension) in have \
                    or not rt.shard.holds(run.system, recon.user_id):
                continue
            task = next((t for t in bench.tasks.get(recon.user_id, ()) if t.target_dimension == recon.dimension), None)
            episode = episodes.get((recon.user_id, task.index)) if task else None
            jobs.append(partial(_attribute, rt, Target(run.bench, recon, task, episode), failed_steps))
    return jobs


async def attribute_runs(rt: Runtime, runs, modes, *, failed_steps: bool = True) -> None:
    """Attribute every scored target of each run's `pass_variant` (the default variant, or an
    imported run's re-scoring), per access mode (and k), in parallel. `failed_steps` False: failed
    reconstructions skip the steps (how passes recorded before were made; replay only)."""
    check_options(modes, "all")
    jobs = []
    for run_id in runs:
        jobs += await plan_attribution(rt, run_id, modes, failed_steps)
    await run_all(rt.store, jobs)
