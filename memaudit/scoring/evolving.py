"""Scoring of evolving targets (issue 25): yes/no criteria beside the usual recovery score B.

A run's evolving target is an entry that changed inside the run (bench/history.py `entry_for_run`):
its current value is the version valid at the run's last played task, its superseded values every
version before that one; a change after the run's end is no target of that run. B judges the
reconstruction against the current value as for any entry. In
addition, on each reconstruction of (mode, k):
  - `current_present`: the reconstruction asserts the current value;
  - `stale_absent`, one per superseded version: the reconstruction does not assert that value;
and once per run on the full final store (mode `store`), whatever the access mode:
  - `stale_in_store`, one per superseded version: the memory still holds that value as true.
The first two feed FAMA (tables/evolving.py); the third is the stale-in-store rate.

Judgments run after the reconstructions of a `score` pass, resume like them (existing keys are
skipped), are re-judged when the user's final snapshot changed, and are never made for a static
benchmark: a static run gets no new call, row or key."""
from __future__ import annotations

from dataclasses import replace
from functools import partial

from memaudit.ask import ask
from memaudit.bench.history import superseded
from memaudit.errors import ContextOverflow, InvalidOutput, failure_note
from memaudit.prompts import load_prompt
from memaudit.roles import BOOL, REASON, RoleSpec, obj
from memaudit.runtime import Runtime
from memaudit.scoring.jobs import each_recorded, run_all
from memaudit.scoring.recovery import (EMPTY_MEMORY, is_unknown, mode_passes, open_memory, ready_users,
                                       reader_window)
from memaudit.types import DEFAULT_VARIANT, STORE_MODE, BankEntry, EvolvingJudgment, Reconstruction

ASSERTS = RoleSpec("evolving_asserts", obj(asserts=BOOL, reason=REASON), 0.0, 160)
STORE = RoleSpec("evolving_store", obj(holds=BOOL, reason=REASON), 0.0, 160)
ASSERTS_ROLE, STORE_ROLE = "recovery_judge:asserts", "recovery_judge:store"
ROLES_CALLED = (ASSERTS_ROLE, STORE_ROLE)
NOTHING_ASSERTED = "the reader answered unknown: it asserts no value (no judge call)"
NOTHING_STORED = "the memory is empty: it holds no value (no judge call)"


def recovery_criteria(entry: BankEntry) -> list[tuple[str, int, str]]:
    """(criterion, version, value) judged on each reconstruction of an evolving entry."""
    current = len(entry.history) - 1
    return [("current_present", current, entry.history[-1].short),
            *(("stale_absent", i, v.short) for i, v in superseded(entry))]


def criteria_keys(entry: BankEntry) -> set[tuple[str, str, int]]:
    """(dimension, criterion, version) of every judgment an evolving target of a run has."""
    return ({(entry.dimension, c, v) for c, v, _ in recovery_criteria(entry)}
            | {(entry.dimension, "stale_in_store", v) for v, _ in superseded(entry)})


def artifact_name(j: EvolvingJudgment) -> str:
    return f"evolving:{j.mode}:{j.k}:{j.variant}:{j.user_id}:{j.dimension}"


async def judge_reconstruction(rt: Runtime, recon: Reconstruction, entry: BankEntry, todo: set) -> None:
    """The `current_present` and `stale_absent` criteria of one reconstruction (those in `todo`)."""
    await each_recorded(partial(_judge_criterion, rt, recon, criterion, version, value)
                        for criterion, version, value in recovery_criteria(entry) if (criterion, version) in todo)
    await rt.store.maybe_flush()


async def _judge_criterion(rt: Runtime, recon: Reconstruction, criterion: str, version: int, value: str) -> None:
    row = EvolvingJudgment(recon.run, recon.mode, recon.k, recon.variant, recon.user_id, recon.category,
                           recon.dimension, criterion, version, None, "", "failed", snapshot_task=recon.snapshot_task)
    with rt.llm.collect() as uses:
        row = await _asserts(rt, recon, row, value)
    _save(rt, row, uses)


async def _asserts(rt: Runtime, recon: Reconstruction, row: EvolvingJudgment, value: str) -> EvolvingJudgment:
    if recon.status == "failed":
        return replace(row, error=f"the reconstruction failed: {recon.error}")
    if recon.status == "overflow" or is_unknown(recon.label or ""):
        # Nothing recovered asserts nothing: the current value is missing, no stale value is asserted.
        return replace(row, verdict=row.criterion != "current_present", reason=NOTHING_ASSERTED, status=recon.status)
    try:
        answer = await ask(rt.llm, ASSERTS_ROLE, spec=ASSERTS, prompt="evolving_asserts",
                           seed_parts=(recon.user_id, recon.dimension, row.criterion, row.version),
                           dimension=recon.dimension, value=value, prediction=recon.label)
    except (ContextOverflow, InvalidOutput) as exc:
        return replace(row, error=failure_note(exc))
    asserts = answer.data["asserts"]
    return replace(row, verdict=asserts if row.criterion == "current_present" else not asserts,
                   reason=answer.data["reason"], status="ok")


async def judge_store(rt: Runtime, memory, base: EvolvingJudgment, entry: BankEntry, versions: list[int],
                      window: int | None) -> None:
    """`stale_in_store` for the superseded `versions` of one entry, on the full final store."""
    await each_recorded(partial(_judge_version, rt, memory, replace(base, version=version), entry, window)
                        for version in versions)
    await rt.store.maybe_flush()


async def _judge_version(rt: Runtime, memory, row: EvolvingJudgment, entry: BankEntry, window: int | None) -> None:
    values = {"memory": memory.block, "category": entry.category, "dimension": entry.dimension,
              "stale": entry.history[row.version].short, "current": entry.history[-1].short}
    with rt.llm.collect() as uses:
        row = await _holds(rt, row, values, window)
    _save(rt, row, uses)


async def _holds(rt: Runtime, row: EvolvingJudgment, values: dict, window: int | None) -> EvolvingJudgment:
    if values["memory"] == EMPTY_MEMORY:
        return replace(row, verdict=False, reason=NOTHING_STORED, status="ok")
    prompt = load_prompt("evolving_store", rt.settings.prompts_dir)
    if window:  # the server's own count (memaudit/llm/tokens.py); without one, its context-length error
        tokens = await rt.llm.count_tokens(STORE_ROLE, prompt.render(**values))
        if tokens is not None and tokens > window:
            return replace(row, status="overflow", error=failure_note(ContextOverflow(STORE_ROLE, tokens, window)))
    try:
        answer = await ask(rt.llm, STORE_ROLE, spec=STORE, prompt=prompt,
                           seed_parts=(row.user_id, row.dimension, row.criterion, row.version), **values)
    except ContextOverflow as exc:
        return replace(row, status="overflow", error=failure_note(exc))
    except InvalidOutput as exc:
        return replace(row, error=failure_note(exc))
    return replace(row, verdict=answer.data["holds"], reason=answer.data["reason"], status="ok")


def _save(rt: Runtime, row: EvolvingJudgment, uses: list) -> None:
    rt.store.write_later([rt.store.evolving.statement(row),
                          *rt.store.calls.use_statements(row.run, artifact_name(row), uses)])


async def plan_evolving(rt: Runtime, run_id: str, modes, ks, *, context_window: int | None,
                        variant: str = DEFAULT_VARIANT) -> list:
    """One job per reconstruction of an evolving target with a criterion not yet judged, and one per
    evolving target of a user whose store was not yet judged. Nothing for a static benchmark."""
    run = await rt.store.runs.require(run_id)
    bench = await rt.store.benchmarks.load(run.bench)
    if not any(e.history for u in bench.users for e in u.bank):
        return []
    await rt.store.write(rt.store.evolving.drop_stale_statements(run_id))
    ready_list = (await ready_users(rt.store, run, bench))[0]
    have = await _drop_non_targets(rt, run_id, variant, ready_list)
    recons = {(r.mode, r.k, r.user_id, r.dimension): r for r in await rt.store.scores.load(run_id, variant=variant)}
    passes = mode_passes(run.system, modes, ks)
    window = reader_window(rt, context_window)
    jobs = []
    for ready in ready_list:
        uid = ready.user.id
        scored = [e for e in ready.user.bank
                  if e.history and any((m, k, uid, e.dimension) in recons for m, k in passes)]
        for entry, (mode, k) in ((e, p) for e in scored for p in passes):
            recon = recons.get((mode, k, uid, entry.dimension))
            todo = {(c, v) for c, v, _ in recovery_criteria(entry) if (mode, k, uid, entry.dimension, c, v) not in have}
            if recon is not None and todo:
                jobs.append(partial(judge_reconstruction, rt, recon, entry, todo))
        store_todo = {e.dimension: [v for v, _ in superseded(e)
                                    if (STORE_MODE, 0, uid, e.dimension, "stale_in_store", v) not in have]
                      for e in scored}
        if any(store_todo.values()):
            memory = await open_memory(rt, run, uid, with_adapter=False)
            for entry in scored:
                base = EvolvingJudgment(run_id, STORE_MODE, 0, variant, uid, entry.category, entry.dimension,
                                        "stale_in_store", 0, None, "", "failed", snapshot_task=ready.snapshot_task)
                if store_todo[entry.dimension]:
                    jobs.append(partial(judge_store, rt, memory, base, entry, store_todo[entry.dimension], window))
    return jobs


async def _drop_non_targets(rt: Runtime, run_id: str, variant: str, ready: list) -> set[tuple]:
    """Delete the judgments of criteria that are no target of the run (made when every target was
    judged against the bank's last version, before issue 33); the keys of those kept."""
    have = await rt.store.evolving.keys(run_id, variant)
    targets = {(r.user.id, *key) for r in ready for e in r.user.bank if e.history for key in criteria_keys(e)}
    users = {r.user.id for r in ready}
    gone = [key for key in have if key[2] in users and key[2:] not in targets]
    if gone:
        await rt.store.write(rt.store.evolving.delete_statements(run_id, variant, gone))
    return have - set(gone)


async def score_evolving(rt: Runtime, runs, modes, *, ks=(5,), context_window: int | None = None,
                         variant: str = DEFAULT_VARIANT) -> None:
    """Judge the criteria of every evolving target of the runs (after their reconstructions)."""
    jobs = []
    for run_id in runs:
        jobs += await plan_evolving(rt, run_id, modes, ks, context_window=context_window, variant=variant)
    if jobs:
        await run_all(rt.store, jobs)
