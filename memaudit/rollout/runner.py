"""Run episodes for several memory systems: all (system, user) pairs concurrently, each user's
tasks in order with the user's own adapter. Every finished episode, the memory snapshot after it
and the calls it used are committed in one transaction, so a killed run resumes at the next
episode with the same memory state.

One process writes a run at a time (the store's run lock: a second `rollout` of the same run is told
it is busy), and a run row is never left without episodes: such a row would pin settings that
nothing ran with. A teacher-forced run (`transcripts`, teacher_forced.py) reads its source's episodes
under the source's lock, so a source that a rollout is still writing is refused as busy."""
from __future__ import annotations

from contextlib import ExitStack, nullcontext, suppress
from dataclasses import replace

import anyio

from memaudit.adapters.base import AdapterContext, MemoryAdapter
from memaudit.adapters.boundary import open_adapter
from memaudit.adapters.registry import BUILTIN_ORIGIN, get_adapter, origin_of
from memaudit.errors import BadInput, MemauditError
from memaudit.ids import check_id
from memaudit.prompts import prompt_hashes
from memaudit.canonical import differences
from memaudit.provenance import ADAPTED, adapted_roles, rollout_provenance, without_adapted
from memaudit.roles import AGENT, DIALOGUE_PHASE, prompts_of
from memaudit.published.layout import published_prompts
from memaudit.rollout.changes import NOTE_PROMPT, Disclosures
from memaudit.rollout.episode import run_episode
from memaudit.rollout.events import (EpisodeDone, ProgressSink, RolloutFinished, RolloutStarted, RunPlanned,
                                       UserDone)
from memaudit.rollout.teacher_forced import Transcripts, default_tag, load_transcripts
from memaudit.runtime import Runtime
from memaudit.store import RunConfig, Store
from memaudit.types import INGEST_MODES, USER_INGEST, Benchmark, Episode, Task, User

PROMPTS = prompts_of(DIALOGUE_PHASE)  # plus each adapter's own prompt files
# Where a run's provenance keeps its deployed library's configuration card (docs/adapters.md).
CONFIGURATION = "configuration"


def run_id(system: str, tag: str | None) -> str:
    return f"{system}_{tag}" if tag else system


def select_users(bench: Benchmark, spec: str | None) -> list[str] | None:
    """`--users 3` = the first three users; `--users user_001,user_004` = those; None = all."""
    if spec is None or not spec.strip():
        return None
    spec = spec.strip()
    if spec.isdigit():
        count = int(spec)
        if count < 1:
            raise BadInput("--users must be at least 1", field="users")
        return [u.id for u in bench.users[:count]]
    return [name.strip() for name in spec.split(",") if name.strip()]


def _users(bench: Benchmark, users: list[str] | None) -> list[User]:
    if users is None:
        return list(bench.users)
    by_id = {u.id: u for u in bench.users}
    unknown = [u for u in users if u not in by_id]
    if unknown:
        raise BadInput(f"unknown users {unknown} in benchmark {bench.name}", field="users")
    return [by_id[u] for u in dict.fromkeys(users)]  # a repeated id would race with itself


def _tasks(bench: Benchmark, user: User, tasks: int | None) -> list[Task]:
    found = list(bench.tasks.get(user.id, ()))
    if not found:
        raise BadInput(f"no tasks for user in benchmark {bench.name}", user=user.id, field="tasks")
    return found if tasks is None else found[:tasks]


async def _open_run(store: Store, run: str, system: str, bench: Benchmark, config: dict, hashes: dict) -> None:
    """Create the run, or resume it only under exactly the configuration, models, protocol and
    prompts it was made with: one run id never mixes two of them."""
    existing = await store.runs.get(run)
    if existing is not None and existing.origin == "rollout":
        await store.runs.drop_if_empty(run)  # left by a rollout killed before its first episode
        existing = await store.runs.get(run)
    if existing is not None:
        changed = differences({**without_adapted(existing.config.to_json()), "prompts": existing.prompt_hashes},
                              {**config, "prompts": hashes})
        if changed:
            more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
            raise BadInput(f"run {run!r} was made with a different {changed[0]}{more}; "
                           "use --tag to start a new run", field="run")
    await store.runs.ensure(run, system, bench.name, config=config, prompt_hashes=hashes)


async def _record_adapted(rt: Runtime, runs: list[str], recorded: RunConfig) -> None:
    """The roles whose server refused a sampling parameter during (or before) this rollout: their
    calls went without it, at the model's default, and the runs' provenance says so."""
    adapted = await adapted_roles((recorded.provenance or {}).get("roles", {}), rt.llm.refusals)
    if adapted:
        for run in runs:
            await rt.store.runs.record_in_provenance(run, ADAPTED, adapted)


def with_adapter_origin(config: dict, system: str) -> dict:
    """A plugin's package and version, and a deployed library's with its configuration card
    (adapters/card.py: every setting memaudit passes or patches), go into the run's provenance, so a
    resume under another version or configuration is refused like a model change (a built-in's
    version is memaudit's: the protocol)."""
    origin = origin_of(system)
    recorded = {} if origin == BUILTIN_ORIGIN else {"adapter": origin}
    adapter = get_adapter(system)
    release = adapter.library_release()
    if release is not None:
        recorded["library"] = release
    card = getattr(adapter, "configuration", None)
    if card is not None:
        recorded[CONFIGURATION] = [row.to_json() for row in card()]
    if not recorded:
        return config
    return {**config, "provenance": {**config.get("provenance", {}), **recorded}}


def episode_artifact(ep: Episode) -> str:
    """How call_uses names an episode."""
    return f"episode:{ep.user_id}:{ep.task_index}"


def episode_record(store: Store, ep: Episode, adapter: MemoryAdapter, uses: list) -> list:
    """The rows of a finished episode: the episode, the memory state after it, the calls it used, and
    the wall time of its memory operations (taken from the adapter's `ops`)."""
    final = ep.turns[-1].preference_score if ep.turns else None
    statements = store.episodes.statements(ep, final)
    statements.append(store.episodes.snapshot_statement(ep.run, ep.user_id, ep.task_index, adapter.snapshot(),
                                                        adapter.dump()))
    statements.extend(store.calls.use_statements(ep.run, episode_artifact(ep), uses))
    statements.extend(store.episodes.op_statements(ep, adapter.ops or []))
    if adapter.ops is not None:
        adapter.ops.clear()
    return statements


async def commit_episode(store: Store, ep: Episode, adapter: MemoryAdapter, uses: list) -> None:
    """One transaction, so a kill never leaves half an episode or an episode without its snapshot."""
    await store.write(episode_record(store, ep, adapter, uses))


async def _run_user(rt: Runtime, run: str, system: str, user: User, tasks: list[Task], *, max_turns: int,
                    k: int, progress: ProgressSink | None, transcripts: Transcripts | None = None,
                    alone: bool = False, ingest: str = USER_INGEST) -> None:
    done = await rt.store.episodes.done(run, user.id)
    pending = [t for t in tasks if t.index not in done]
    if not pending:
        return
    adapter = open_adapter(system, AdapterContext(rt.llm, rt.embedder, scope=f"{run}/{user.id}",
                                                  agent_context_window=rt.settings.role(AGENT).context_window,
                                                  ingest=ingest),
                           rt.settings.db.parent)
    adapter.ops = []  # its writes and reads are timed (adapters/boundary.py)
    adapter.alone = alone
    try:
        await _run_tasks(rt, run, user, pending, adapter, max_turns=max_turns, k=k, progress=progress,
                         transcripts=transcripts)
    finally:
        with anyio.CancelScope(shield=True):  # a failed or cancelled user's worker stops too
            await adapter.close()
    if progress:
        progress(UserDone(run))


async def _run_tasks(rt: Runtime, run: str, user: User, pending: list[Task], adapter, *, max_turns: int, k: int,
                     progress: ProgressSink | None, transcripts: Transcripts | None) -> None:
    snapshot = await rt.store.episodes.last_snapshot(run, user.id)
    if snapshot is not None:
        await adapter.restore(snapshot["state"])
    disclosures = await Disclosures.load(rt.store, run, user)
    for task in pending:
        with rt.llm.collect() as uses:
            if transcripts is None:
                ep = await run_episode(rt.llm, adapter, user, task, run=run, max_turns=max_turns, k=k,
                                       pending=disclosures.pending(task.index))
            else:
                ep = await transcripts.feed(adapter, run, task, k=k)
        disclosures.record(ep)
        await commit_episode(rt.store, ep, adapter, uses)
        if progress:
            tokens = await rt.store.calls.artifact_tokens(ep.run, episode_artifact(ep))
            progress(EpisodeDone(ep, len(uses), sum(1 for _, _, cached in uses if cached), tokens))


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


async def run_rollout(rt: Runtime, bench: Benchmark, systems: list[str], *, users: list[str] | None = None,
                      tasks: int | None = None, max_turns: int = 25, tag: str | None = None, k: int = 5,
                      progress: ProgressSink | None = None, transcripts: str | None = None,
                      time_alone: bool = False, ingest: str = USER_INGEST) -> list[str]:
    """Run (or resume) one run per system; returns the run ids. `progress` receives the rollout's
    events (memaudit/rollout/events.py); None (or False) sends none. `transcripts`: a recorded run
    whose episodes are replayed into each system instead of played live (teacher_forced.py).
    `time_alone`: one (system, user) at a time, system after system, so each system's wall times
    are its own, not shared with the others' (slower; the figures to compare systems by).
    `ingest`: what a deployed library is given of the conversation (types.py INGEST_MODES)."""
    return await rollout_runs(rt, bench, systems, RunConfig(users, tasks, max_turns, k, tag, transcripts=transcripts,
                                                            ingest=ingest), progress=progress, time_alone=time_alone)


async def rollout_runs(rt: Runtime, bench: Benchmark, systems: list[str], config: RunConfig, *,
                       progress: ProgressSink | None = None, time_alone: bool = False) -> list[str]:
    """`run_rollout` with its options as the RunConfig the runs record (replay passes the recorded one)."""
    tasks, max_turns, k, tag = config.tasks, config.max_turns, config.k, config.tag
    if not systems:
        raise BadInput("no memory systems given", field="systems")
    if max_turns < 1 or k < 1 or (tasks is not None and tasks < 1):
        raise BadInput("--max-turns, --k and --tasks must be at least 1", field="max_turns/k/tasks")
    if config.ingest not in INGEST_MODES:
        raise BadInput(f"--ingest must be one of {', '.join(INGEST_MODES)}, not {config.ingest!r}", field="ingest")
    for system in systems:
        get_adapter(system)  # unknown names fail before anything is written
    source: Transcripts | None = None
    if config.transcripts is None:
        chosen = _users(bench, config.users)
        plan = {u.id: _tasks(bench, u, tasks) for u in chosen}
        recorded = RunConfig([u.id for u in chosen], tasks, max_turns, k, tag,  # users resolved
                             provenance=rollout_provenance(rt.settings), ingest=config.ingest)
        prompts = PROMPTS + ((NOTE_PROMPT,) if any(e.history for u in chosen for e in u.bank) else ())
    else:
        source_run = check_id(config.transcripts, "run id", field="transcripts")
        with rt.store.runs.lock(source_run):  # its episodes are final: no rollout is writing them now
            source = await load_transcripts(rt.store, source_run, bench, users=config.users, tasks=tasks)
        chosen, plan = _users(bench, source.users), source.plan
        tag = tag or default_tag(config.transcripts)
        recorded = replace(source.run_config(rt.settings, k=k, tag=tag), ingest=config.ingest)
        prompts = ()  # no assistant, simulator or judge prompt is used
    runs = [check_id(run_id(s, tag), "run id", field="tag") for s in systems]
    if len(set(runs)) != len(runs):
        raise BadInput(f"a system is listed twice: {', '.join(systems)}", field="systems")
    with ExitStack() as locks:
        for run in runs:
            locks.enter_context(rt.store.runs.lock(run))
        try:
            await _rollout_locked(rt, bench, systems, runs, chosen, plan, recorded.to_json(), prompts, source,
                                  max_turns=max_turns, k=k, progress=progress, time_alone=time_alone,
                                  ingest=config.ingest)
            await _record_adapted(rt, runs, recorded)
        except BaseException:
            with anyio.CancelScope(shield=True), suppress(MemauditError):
                for run in runs:  # the failure is what the user needs to see, not a failed cleanup
                    await rt.store.runs.drop_if_empty(run)
            raise
    return runs


async def _rollout_locked(rt: Runtime, bench: Benchmark, systems: list[str], runs: list[str], chosen: list[User],
                          plan: dict[str, list[Task]], recorded: dict, prompts: tuple[str, ...],
                          source: Transcripts | None, *, max_turns: int, k: int,
                          progress: ProgressSink | None, time_alone: bool = False, ingest: str = USER_INGEST) -> None:
    for system, run in zip(systems, runs):
        hashes = prompt_hashes((*prompts, *get_adapter(system).prompts, *published_prompts(rt.settings.prompts_dir,
                                                                                          system, prompts)),
                               rt.settings.prompts_dir)
        await _open_run(rt.store, run, system, bench, with_adapter_origin(recorded, system), hashes)
        mine = [u for u in chosen if rt.shard.holds(system, u.id)]
        finished = [len(await rt.store.episodes.done(run, u.id) & {t.index for t in plan[u.id]}) for u in mine]
        if progress:
            progress(RunPlanned(run, len(mine), sum(len(plan[u.id]) for u in mine), sum(finished),
                                sum(n == len(plan[u.id]) for n, u in zip(finished, mine))))
    # The embedded server answers one request at a time: interleaving pairs there buys no speed and
    # evicts each pair's prompt prefix from its cache, so pairs run one after another, user-major
    # (a user's simulator and judge prefixes are shared by every system).
    # --time-alone runs them one at a time too, system after system, for wall times of one system alone.
    one_at_a_time = rt.settings.on_embedded(AGENT) or time_alone
    pairs = [(s, r, u) for u in chosen for s, r in zip(systems, runs)] if one_at_a_time and not time_alone else \
        [(s, r, u) for s, r in zip(systems, runs) for u in chosen]
    pairs = [(s, r, u) for s, r, u in pairs if rt.shard.holds(s, u.id)]
    limiter = anyio.CapacityLimiter(1 if one_at_a_time else len(pairs))
    # A deployed library holds a store per user (a worker process, cognee's about 0.5 GB; an
    # embedded database): at most --library-workers such users run at once, each closed when its
    # user is done.
    workers = anyio.CapacityLimiter(rt.settings.library_workers)
    bounded = {s for s in systems if get_adapter(s).bounded_users}

    async def run_pair(system: str, run: str, user: User) -> None:
        async with limiter, workers if system in bounded else nullcontext():
            await _run_user(rt, run, system, user, plan[user.id], max_turns=max_turns, k=k, progress=progress,
                            transcripts=source, alone=one_at_a_time, ingest=ingest)

    if progress:
        progress(RolloutStarted())
    try:
        async with anyio.create_task_group() as tg:
            for system, run, user in pairs:
                tg.start_soon(run_pair, system, run, user)
    except BaseExceptionGroup as group:
        # The first failure (e.g. an unreachable endpoint) is what the user needs to see; the
        # other pairs were cancelled because of it.
        raise _first_leaf(group) from None
    finally:
        if progress:
            progress(RolloutFinished())
    await rt.store.flush()
