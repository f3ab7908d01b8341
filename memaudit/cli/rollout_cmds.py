"""Commands: rollout — run episodes for one or more memory systems (resumable)."""
from __future__ import annotations

import click

from memaudit.cli.common import (
    MEMORY, MODEL, STORE, WORKERS, command, current_settings, global_options, out, run, split_list, stage_options)
from memaudit.stages import ROLLOUT
from memaudit.types import INGEST_MODES, USER_INGEST


@command("rollout")
@click.option("--bench", "bench_ref", required=True, help="`sample`, a release-layout path, or an imported name")
@click.option("--systems", required=True, help="comma-separated memory systems, e.g. nomem,longctx_full")
@click.option("--users", default=None, help="`3` = the first three users, or `user_001,user_004`")
@click.option("--tasks", type=click.IntRange(1, 1_000_000), default=None, help="only the first N tasks of each user")
@click.option("--max-turns", type=click.IntRange(1, 1_000_000), default=None, help="assistant replies per episode  [default: 25]")
@click.option("--tag", default=None, help="run id becomes <system>_<tag> (with --transcripts: default tf_<RUN>); "
              "a run id is a safe id: 1-128 letters, digits, '_', '-', '.', starting with a letter or a digit")
@click.option("--k", type=click.IntRange(1, 100_000), default=5, show_default=True, help="memory items retrieved per reply")
@click.option("--transcripts", default=None, metavar="RUN",
              help="teacher-forced: replay the recorded episodes of RUN into each system's memory "
                   "(no assistant, simulator or judge calls)")
@click.option("--ingest", type=click.Choice(INGEST_MODES), default=USER_INGEST, show_default=True,
              help="what a deployed library is given: `user`, each user message (the published study); "
                   "`exchange`, each user message with the assistant reply before it, through the library's "
                   "own multi-message add (its quickstart's way); recorded in the run's config")
@click.option("--quiet", is_flag=True, help="plain log lines instead of the live table")
@click.option("--time-alone", is_flag=True,
              help="run one system and user at a time, so each system's write and search times are its own "
                   "(slower; for latencies meant to be compared across systems)")
@stage_options(ROLLOUT)
@global_options(uses=STORE + MODEL + MEMORY + WORKERS)
def rollout(bench_ref, systems, users, tasks, max_turns, tag, k, transcripts, ingest, quiet, time_alone, shard):
    """Run (or resume) episodes: the assistant with each memory system helps the simulated users,
    or, with --transcripts, each memory system is fed the recorded episodes of a run.
    One process writes a run at a time: a second rollout of the same run is refused as busy."""
    run(_rollout, current_settings(), bench_ref, systems, users, tasks, max_turns, tag, k, transcripts, ingest, quiet,
        time_alone, shard)


async def _rollout(settings, bench_ref, systems, users, tasks, max_turns, tag, k, transcripts, ingest, quiet,
                   time_alone, shard):
    from memaudit.adapters.card import OFF
    from memaudit.adapters.registry import get_adapter
    from memaudit.bench.instances import resolve_bench
    from memaudit.cli.progress import RolloutProgress
    from memaudit.errors import BadInput
    from memaudit.llm.server import require_embedded
    from memaudit.rollout.runner import run_rollout, select_users
    from memaudit.runtime import open_runtime
    from memaudit.shards import WHOLE
    from memaudit.tables.health import final_memory, long_term_written
    from memaudit.tables.metrics import memory_write_failures, total_write_failures, uncalled_tool_requests

    if transcripts is not None and max_turns is not None:
        raise BadInput("--max-turns does not apply with --transcripts: the episodes are the recorded ones",
                       field="max_turns")
    names = split_list(systems) or []
    for name in names:
        get_adapter(name)  # an unknown or broken system is refused before a store is opened
    for name in names:  # a library feature off here (a piece not installed) is said, never silent
        for row in getattr(get_adapter(name), "configuration", list)():
            if row.used == OFF:
                out.print(f"{name}: {row.setting} is off: {row.why} (memaudit systems {name})", highlight=False)
    if transcripts is None and not settings.db.exists():  # a new store caches no answer: the model is needed
        require_embedded(settings)
    async with open_runtime(settings, shard=shard) as rt:
        bench = await resolve_bench(rt.store, bench_ref)
        runs = await run_rollout(rt, bench, names, users=select_users(bench, users), tasks=tasks,
                                 max_turns=25 if max_turns is None else max_turns, tag=tag, k=k,
                                 progress=RolloutProgress("log" if quiet else "live"), transcripts=transcripts,
                                 ingest=ingest, time_alone=time_alone)
        forced = f" (teacher-forced on the transcripts of {transcripts})" if transcripts else ""
        elsewhere = []
        for run_name in runs:
            row = await rt.store.episodes.outcomes(run_name)
            if not row["episodes"] and rt.shard != WHOLE:  # every cell of this run is another shard's (its run is
                # opened all the same: the study's later sharded commands name it)
                elsewhere.append(run_name)
                continue
            by_user = await memory_write_failures(rt.store, run_name)
            lost = total_write_failures(by_user.values())
            out.print(f"{run_name}: {row['episodes']} episodes, {row['satisfied']} satisfied, "
                      f"{row['failed']} failed, {row['fallbacks']} simulator fallbacks, "
                      f"{row['judge_failures']} preference-judge failures"
                      + ("" if lost is None else f", {lost} memory write failures") + forced, highlight=False)
            if lost:  # never a silently emptier memory: who lost how many writes
                out.print(f"{run_name}: memory writes lost (a model answer the memory system could not use): "
                          + ", ".join(f"{user} {n}" for user, n in sorted(by_user.items()) if n), highlight=False)
            cut = total_write_failures((await rt.store.episodes.last_embed_truncated(run_name)).values())
            if cut:  # never a silently shorter text: the embedding model read only the start of these
                out.print(f"{run_name}: {cut} texts cut at the embedding model's window before they were embedded "
                          "(embed_truncated: the model read their first tokens only)", highlight=False)
            uncalled = await uncalled_tool_requests(rt.store, run_name)
            if uncalled:
                out.print(f"{run_name}: the memory library's tool requests never got a tool call (the model answered "
                          f"in text; counted as lost writes): " + ", ".join(f"{user} {n}" for user, n in
                                                                           sorted(uncalled.items())), highlight=False)
            memory = await final_memory(rt.store, run_name, await rt.store.episodes.snapshot_users(run_name))
            if long_term_written(memory, lost) is False:  # a library that only queued: say so once
                held = ", ".join(f"{kind} {n}" for kind, n in memory["kinds"].items())
                out.print(f"{run_name}: its long-term store was never written (the users' final memories hold "
                          f"{'only ' + held if held else 'nothing'}); see `memaudit tables --only health`",
                          highlight=False)
        if elsewhere:
            out.print(f"shard {rt.shard}: no (system, user) cell of {', '.join(elsewhere)} falls in this shard",
                      highlight=False)


COMMANDS = [rollout]
