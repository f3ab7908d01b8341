"""Commands: utilization (Know/Act for scored runs) and generate-act (Act scenarios for a benchmark)."""
from __future__ import annotations

from pathlib import Path

import click

from memaudit.cli.common import (
    MEMORY, MODEL, STORE, command, current_settings, global_options, run, split_list, stage_options)
from memaudit.stages import UTILIZATION
from memaudit.utilization.act import KNOW_THRESHOLD


@command("utilization")
@click.option("--runs", default=None, help="comma-separated run ids (default: every run with retrieve scores at k)")
@click.option("--k", type=click.IntRange(1, 100_000), default=5, show_default=True,
              help="retrieve k of Know (its recovery pass) and of the assistant's context()")
@click.option("--threshold", type=float, default=KNOW_THRESHOLD, show_default=True,
              help="recovery score at or above which an entry counts as known")
@stage_options(UTILIZATION)
@global_options(uses=STORE + MODEL + MEMORY)
def utilization(runs, k, threshold, shard):
    """Know vs Act: is what the memory knows used when the user asks for help?"""
    run(_utilization, current_settings(), split_list(runs), k, threshold, shard)


async def _utilization(settings, runs, k, threshold, shard):
    from memaudit.runtime import open_runtime
    from memaudit.tables.utilization import load_cases, outcome
    from memaudit.utilization.act import utilization_runs

    async with open_runtime(settings, shard=shard) as rt:
        chosen = runs if runs is not None else await rt.store.runs.names()
        measured = await utilization_runs(rt, chosen, k=k, threshold=threshold)
        for run_id in chosen:
            if run_id not in measured:
                click.echo(f"{run_id}: no retrieve scores at k={k} (a system without retrieval has none; else run "
                           f"`memaudit score --mode retrieve --k {k}`): nothing is known, so nothing measured")
                continue
            cases = await load_cases(rt.store, run_id, k)
            decided = [c for c in cases if c["status"] == "ok" and c["know"] is not None]
            counts = {name: sum(outcome(c["know"], c["act"]) == name for c in decided)
                      for name in ("kp_ap", "kp_af", "kf_ap", "kf_af")}
            click.echo(f"{run_id} k={k}: {len(decided)} targets, " + ", ".join(f"{n} {v}" for n, v in counts.items())
                       + f", {sum(c['act'] == 'disagree' for c in decided)} order disagreements, "
                       f"{len(cases) - len(decided)} failed")


@command("generate-act")
@click.option("--bench", "bench_ref", required=True, help="`sample`, a release-layout directory, or a stored name")
@click.option("--users", default=None, help="`3` = the first three users, or `user_001,user_004` (default: all)")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="also write the scenarios as act_scenarios/user_XXX.json here")
@global_options(uses=STORE + MODEL)
def generate_act(bench_ref, users, out_dir):
    """Act scenarios for every bank entry that has none yet, checked by the blind anti-fishing critic."""
    run(_generate_act, current_settings(), bench_ref, users, out_dir)


async def _generate_act(settings, bench_ref, users, out_dir):
    from memaudit.bench.act_generate import generate_act
    from memaudit.bench.instances import resolve_act_scenarios, resolve_bench
    from memaudit.rollout.runner import select_users
    from memaudit.runtime import open_runtime

    async with open_runtime(settings) as rt:
        bench = await resolve_bench(rt.store, bench_ref)
        await resolve_act_scenarios(rt.store, bench)  # the sample's bundled ones count as existing
        wanted = select_users(bench, users)
        chosen = None if wanted is None else [u for u in bench.users if u.id in wanted]
        report = await generate_act(rt, bench, users=chosen, out_dir=out_dir)
    click.echo(f"{report.written} scenario(s) written, {report.kept} kept, {report.still_fishing} still fishing "
               f"after the edit budget, {len(report.failures)} failed")
    for where, error in sorted(report.failures.items()):
        click.echo(f"  {where}: {error}")


COMMANDS = [utilization, generate_act]
