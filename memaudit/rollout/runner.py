"""Run episodes for several memory systems: all (system, user) pairs concurrently, each user's
tasks in order with the user's own adapter. Every finished episode, the memory snapshot after it
and the calls it used are committed in one transaction, so a killed run resumes at the next
episode with the same memory state."""
from __future__ import annotations

import anyio

from memaudit.adapters.base import AdapterContext, MemoryAdapter
from memaudit.adapters.registry import get_adapter
from memaudit.errors import BadInput
from memaudit.prompts import prompt_hashes
from memaudit.provenance import differences, rollout_provenance
from memaudit.rollout.episode import run_episode
from memaudit.rollout.progress import RolloutProgress
from memaudit.rollout.teacher_forced import Transcripts, default_tag, load_transcripts
from memaudit.runtime import Runtime
from memaudit.store import Store
from memaudit.types import Benchmark, Episode, Task, User

PROMPTS = ("agent", "simulator", "pref_judge")  # plus each adapter's own prompt files


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
    existing = await store.get_run(run)
    if existing is not None:
        changed = differences({**existing["config"], "prompts": existing["prompt_hashes"]},
                              {**config, "prompts": hashes})
        if changed:
            more = f" and {len(changed) - 1} more" if len(changed) > 1 else ""
            raise BadInput(f"run {run!r} was made with a different {changed[0]}{more}; "
                           "use --tag to start a new run", field="run")
    await store.ensure_run(run, system, bench.name, config=config, prompt_hashes=hashes)


def episode_record(store: Store, ep: Episode, adapter: MemoryAdapter, uses: list) -> list:
    """The rows of a finished episode: the episode, the memory state after it, the calls it used."""
    final = ep.turns[-1].preference_score if ep.turns else None
    statements = store.episode_statements(ep, final)
    statements.append(store.snapshot_statement(ep.run, ep.user_id, ep.task_index, adapter.snapshot(), adapter.dump()))
    statements.extend(store.call_use_statements(ep.run, f"episode:{ep.user_id}:{ep.task_index}", uses))
    return statements


async def commit_episode(store: Store, ep: Episode, adapter: MemoryAdapter, uses: list) -> None:
    """One transaction, so a kill never leaves half an episode or an episode without its snapshot."""
    await store.write(episode_record(store, ep, adapter, uses))


async def _episode_tokens(store: Store, ep: Episode) -> int:
    row = await store.fetchone(
        "SELECT COALESCE(SUM(c.prompt_tokens + c.completion_tokens), 0) AS n FROM call_uses u "
        "JOIN calls c ON c.key = u.key WHERE u.run=? AND u.artifact=?",
        (ep.run, f"episode:{ep.user_id}:{ep.task_index}"))
    return row["n"]


async def _run_user(rt: Runtime, run: str, system: str, user: User, tasks: list[Task], *, max_turns: int,
                    k: int, progress: RolloutProgress, transcripts: Transcripts | None = None) -> None:
    done = await rt.store.episodes_done(run, user.id)
    pending = [t for t in tasks if t.index not in done]
    if not pending:
        return
    adapter = get_adapter(system)(AdapterContext(rt.llm, rt.embedder, scope=f"{run}/{user.id}",
                                                 agent_context_window=rt.settings.role("agent").context_window))
    snapshot = await rt.store.last_snapshot(run, user.id)
    if snapshot is not None:
        await adapter.restore(snapshot["state"])
    for task in pending:
        with rt.llm.collect() as uses:
            if transcripts is None:
                ep = await run_episode(rt.llm, adapter, user, task, run=run, max_turns=max_turns, k=k)
            else:
                ep = await transcripts.replay(adapter, run, task, k=k)
        await commit_episode(rt.store, ep, adapter, uses)
        tokens = await _episode_tokens(rt.store, ep) if progress.mode != "off" else 0
        progress.episode_done(ep, uses, tokens)
    progress.user_done(run)


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


async def run_rollout(rt: Runtime, bench: Benchmark, systems: list[str], *, users: list[str] | None = None,
                      tasks: int | None = None, max_turns: int = 25, tag: str | None = None, k: int = 5,
                      progress: bool | str = True, transcripts: str | None = None) -> list[str]:
    """Run (or resume) one run per system; returns the run ids. `progress`: True/"live" for the
    live table, "log" for plain lines, False/"off" for nothing. `transcripts`: a recorded run whose
    episodes are replayed into each system instead of played live (teacher_forced.py)."""
    if not systems:
        raise BadInput("no memory systems given", field="systems")
    if max_turns < 1 or k < 1 or (tasks is not None and tasks < 1):
        raise BadInput("--max-turns, --k and --tasks must be at least 1", field="max_turns/k/tasks")
    for system in systems:
        get_adapter(system)  # unknown names fail before anything is written
    source: Transcripts | None = None
    if transcripts is None:
        chosen = _users(bench, users)
        plan = {u.id: _tasks(bench, u, tasks) for u in chosen}
        config = {"users": [u.id for u in chosen], "tasks": tasks, "max_turns": max_turns, "k": k, "tag": tag,
                  "provenance": rollout_provenance(rt.settings)}
        prompts = PROMPTS
    else:
        source = await load_transcripts(rt.store, transcripts, bench, users=users, tasks=tasks)
        chosen, plan = _users(bench, source.users), source.plan
        tag = tag or default_tag(transcripts)
        config = source.run_config(rt.settings, k=k, tag=tag)
        prompts = ()  # no assistant, simulator or judge prompt is used
    runs = [run_id(s, tag) for s in systems]
    if len(set(runs)) != len(runs):
        raise BadInput(f"a system is listed twice: {', '.join(systems)}", field="systems")
    mode = {True: "live", False: "off"}.get(progress, progress)
    tracker = RolloutProgress(mode)
    for system, run in zip(systems, runs):
        hashes = prompt_hashes((*prompts, *get_adapter(system).prompts), rt.settings.prompts_dir)
        await _open_run(rt.store, run, system, bench, config, hashes)
        finished = [len(await rt.store.episodes_done(run, u.id) & {t.index for t in plan[u.id]}) for u in chosen]
        tracker.add_run(run, len(chosen), sum(len(t) for t in plan.values()), sum(finished),
                        sum(n == len(plan[u.id]) for n, u in zip(finished, chosen)))
    # The embedded server answers one request at a time: interleaving pairs there buys no speed and
    # evicts each pair's prompt prefix from its cache, so pairs run one after another, user-major
    # (a user's simulator and judge prefixes are shared by every system).
    one_at_a_time = rt.settings.on_embedded("agent")
    pairs = [(s, r, u) for u in chosen for s, r in zip(systems, runs)] if one_at_a_time else \
        [(s, r, u) for s, r in zip(systems, runs) for u in chosen]
    limiter = anyio.CapacityLimiter(1 if one_at_a_time else len(pairs))

    async def run_pair(system: str, run: str, user: User) -> None:
        async with limiter:
            await _run_user(rt, run, system, user, plan[user.id], max_turns=max_turns, k=k, progress=tracker,
                            transcripts=source)

    with tracker:
        try:
            async with anyio.create_task_group() as tg:
                for system, run, user in pairs:
                    tg.start_soon(run_pair, system, run, user)
        except BaseExceptionGroup as group:
            # The first failure (e.g. an unreachable endpoint) is what the user needs to see; the
            # other pairs were cancelled because of it.
            raise _first_leaf(group) from None
    await rt.store.flush()
    return runs
