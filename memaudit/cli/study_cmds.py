"""Commands: merge (the stores of a sharded study into one), cost (what runs cost) and plan (what a
study will cost before it runs)."""
from __future__ import annotations

import os
from pathlib import Path

import click
import orjson

from memaudit.cli.common import STORE, command, current_settings, given, global_options, run, split_list
from memaudit.cli.score_cmds import panel_options
from memaudit.errors import BadInput
from memaudit.study.emit import (ENGINES, Resources, k8s_files, one_line, settings_env, slurm_files, study_commands,
                                 write_files)
from memaudit.study.plan import STUDY_COMMANDS, Study, study_panel


@command("merge")
@click.argument("shards", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--into", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="the study store (created when absent); replaced only by a complete merge")
@click.option("--partial", is_flag=True,
              help="merge the shards given although a shard of the study is missing (named on stderr); merge "
                   "again once it has run")
def merge(shards, into, partial):
    """Merge the stores of a sharded study (SHARD.db...) into one study store, all or nothing."""
    from memaudit.store.merge import merge_shards

    report = run(merge_shards, list(shards), into, partial=partial)
    for line in report.missing:
        click.echo(f"memaudit: missing from the study: {line}", err=True)
    for shard in report.shards:
        added = ", ".join(f"{n} {table}" for table, n in sorted(shard.added.items())) or "nothing new"
        click.echo(f"{shard.shard}: {added}")
    click.echo(f"{report.into}: " + ("merged" if report.changed else "unchanged (every row was already there)"))


def _usd(value) -> str:
    return "unpriced" if value is None else f"${value:,.4f}"


@command("cost")
@click.option("--runs", default=None, help="comma-separated run ids (default: every run in the store)")
@click.option("--prices", "prices_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="TOML price list: [models.\"NAME\"] input_per_mtok, cached_input_per_mtok, output_per_mtok, "
                   "batch_input_per_mtok, batch_output_per_mtok (replaces the bundled list model by model)")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@global_options(uses=STORE)
def cost(runs, prices_file, fmt):
    """What each run cost: tokens per stage and role, priced on demand and in batch, beside its plan."""
    report = run(_cost, current_settings(), split_list(runs), prices_file)
    if fmt == "json":
        click.echo(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
        return
    click.echo(_cost_markdown(report))


async def _cost(settings, runs, prices_file):
    from memaudit.store import open_store, select_runs
    from memaudit.study.cost import load_prices, run_costs

    prices = load_prices(prices_file)
    async with open_store(settings.db) as store:
        chosen = [r.run for r in await select_runs(store, runs)]
        return await run_costs(store, chosen, prices)


COLUMNS = ("calls", "uncached_prompt_tokens", "cached_prompt_tokens", "completion_tokens", "reasoning_tokens")


def _cost_markdown(report: dict) -> str:
    lines = [_prices_line(report["prices"]), "",
             "| run | stage | role | calls | prompt (uncached) | prompt (cached) | completion | of which reasoning "
             "| on demand | batch |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in report["runs"]:
        for stage, roles in r["by_stage"].items():
            for role, e in roles.items():
                lines.append(f"| {r['run']} | {stage} | {role} | " + " | ".join(f"{e[c]:,}" for c in COLUMNS)
                             + f" | {_usd(e['usd_on_demand'])} | {_usd(e['usd_batch'])} |")
        lines.append(f"| **{r['run']}** | all | all | " + " | ".join(f"{r[c]:,}" for c in COLUMNS)
                     + f" | {_usd(r['usd_on_demand'])} | {_usd(r['usd_batch'])} |")
    t = report["total"]
    lines.append("| **total** | | | " + " | ".join(f"{t[c]:,}" for c in COLUMNS)
                 + f" | {_usd(t['usd_on_demand'])} | {_usd(t['usd_batch'])} |")
    lines += _estimates(report["runs"])
    return "\n".join(lines + _unpriced_lines([t]))


def _prices_line(p: dict) -> str:
    """Where the prices come from: the bundled list, or a --prices file and the bundled list for the
    models the file does not price."""
    line = f"Prices of {p['date'] or 'no stated date'} ({p['source'] or 'no source given'})"
    if "others" in p:
        line += f"; models it does not price: the bundled list of {p['others']['date']} ({p['others']['source']})"
    return line + "; USD."


def _unpriced_lines(groups: list[dict]) -> list[str]:
    """One line per reason some calls have no price, with their number: shown as unpriced, never $0."""
    counts: dict[str, int] = {}
    for group in groups:
        for why, n in group["unpriced_calls"].items():
            counts[why] = counts.get(why, 0) + n
    if not counts:
        return []
    lines = ["", "Unpriced calls (their cost is unknown, not 0):", *(f"- {n:,} call(s): {why}"
                                                                  for why, n in sorted(counts.items()))]
    if any(e["unpriced"] for e in groups):
        lines.append("Give the missing models' prices with --prices FILE.")
    return lines


def _estimates(runs: list[dict]) -> list[str]:
    planned = [r for r in runs if r["estimate"]]
    if not planned:
        return []
    lines = ["", "| run | planned calls | actual calls | difference | planned on demand | actual on demand |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in planned:
        e = r["estimate"]
        diff = f"{(r['calls'] - e['calls']) / e['calls']:+.1%}" if e["calls"] else "n/a"
        lines.append(f"| {r['run']} | {e['calls']:,} | {r['calls']:,} | {diff} | {_usd(e['usd_on_demand'])} | "
                     f"{_usd(r['usd_on_demand'])} |")
    return lines


# What plan reads: the study's model settings, and with --emit those the jobs get (study/emit.py).
PLANNED = STORE + ("base_url", "model", "backend", "concurrency", "seed", "timeout", "rpm", "tpm", "prompts_dir",
                   "embed_model")


@command("plan")
@click.option("--bench", "bench_ref", required=True, help="`sample`, a release-layout path, or an imported name")
@click.option("--systems", required=True, help="comma-separated memory systems")
@click.option("--users", default=None,
              help="as rollout's: `3` = the first three users, or `user_001,user_004` (default: all); a count "
                   "beyond the benchmark's plans users shaped like its average")
@click.option("--tasks", type=click.IntRange(min=1), default=None, help="only the first N tasks of each user")
@click.option("--max-turns", type=click.IntRange(1, 1_000_000), default=25, show_default=True,
              help="assistant replies per episode, as rollout's")
@click.option("--tag", default=None, help="the --tag the study's rollout will use (run ids <system>_<tag>)")
@click.option("--mode", type=click.Choice(["dump_all", "retrieve", "both"]), default="both", show_default=True,
              help="the read operator(s) to be scored and attributed")
@click.option("--k", "k_text", default="5", show_default=True, help="top-k of retrieve; `1,3,5` plans a sweep")
@click.option("--dims", type=click.Choice(["all", "targeted"]), default="all", show_default=True,
              help="as score's: targeted = only the bank entries whose task ran")
@panel_options
@click.option("--stages", default=",".join(STUDY_COMMANDS), show_default=True,
              help="the commands the study runs, of rollout, score, attribute")
@click.option("--from", "pilot_db", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="a pilot store made with the same flags, whose per-role averages to use (default: documented "
                   "defaults)")
@click.option("--prices", "prices_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="TOML price list replacing the bundled one model by model")
@click.option("--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option("--shards", type=click.IntRange(1, 100_000), default=None,
              help="with --emit: the number of shards (array tasks, Indexed Job completions)")
@click.option("--emit", type=click.Choice(ENGINES), default=None,
              help="write what runs the study on a Slurm cluster or Kubernetes into --out (see docs/clusters.md, \"A study "
                   "on a cluster\"); the estimate is recorded in DIR/bench.db, the seed of every shard's store")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="with --emit: the study folder (scripts, bench.db, shards/, logs/, study.db)")
@click.option("--cpus", type=click.IntRange(min=1), default=Resources.cpus, show_default=True,
              help="CPUs of each shard")
@click.option("--mem-gb", type=click.IntRange(min=1), default=Resources.mem_gb, show_default=True,
              help="memory of each shard and of the merge, GB")
@click.option("--time", "time_limit", default=Resources.time, show_default=True,
              help="wall time of each job, HH:MM:SS (Kubernetes: its pods' activeDeadlineSeconds)")
@click.option("--partition", default=None, help="Slurm partition (default: the cluster's)")
@click.option("--image", default=Resources.image, show_default=True, help="Kubernetes: an image with memaudit")
@click.option("--volume", default=Resources.volume, show_default=True,
              help="Kubernetes: the PersistentVolumeClaim the pods share")
@click.option("--mount", default=Resources.mount, show_default=True, help="Kubernetes: where the pods mount it")
@click.option("--secret", default=Resources.secret, show_default=True,
              help="Kubernetes: the Secret whose `api-key` the pods read as OPENAI_API_KEY (optional)")
@global_options(uses=PLANNED)
def plan(bench_ref, systems, users, tasks, max_turns, tag, mode, k_text, dims, judges, repeats, stages, pilot_db,
         prices_file, fmt, shards, emit, out, cpus, mem_gb, time_limit, partition, image, volume, mount, secret):
    """Estimate the calls, tokens and cost of a study from the flags its commands take; recorded in
    the store for `cost`. With --emit, also write the files that run it on a cluster."""
    from memaudit.cli.score_cmds import _ks, _modes
    from memaudit.ids import check_id
    from memaudit.rollout.runner import run_id

    study = Study(bench_ref, tuple(split_list(systems) or ()), users, tasks, max_turns, tag, tuple(_modes(mode)),
                  _ks(k_text), dims, tuple(split_list(judges)) if judges else None, repeats, _stages(stages))
    for system in study.systems:  # the run ids rollout will make: refused here as rollout would refuse them
        check_id(run_id(system, tag), "run id", field="tag")
    settings = current_settings()
    study_panel(settings, study)  # an even panel is refused before any store is opened
    if emit is None and (shards or out):
        raise BadInput("--shards and --out go with --emit slurm|k8s", field="emit")
    if emit is not None and (not shards or out is None):
        raise BadInput("--emit needs --shards N and --out DIR", field="emit")
    if emit is None:
        (found, _), written = run(_plan, settings, study, pilot_db, prices_file), []
    else:
        resources = Resources(cpus, mem_gb, time_limit, partition, image, volume, mount, secret)
        found, written = _emit(emit, settings, study, shards, resources, pilot_db, prices_file, out)
    differs = sorted({d for e in found.values() for d in e["pilot_differs"]})
    if differs:
        click.echo(f"memaudit: the pilot was made with {'; '.join(differs)}, not as the study will run: its rates "
                   "may not be the study's", err=True)
    click.echo(orjson.dumps(found, option=orjson.OPT_INDENT_2).decode() if fmt == "json" else _plan_markdown(found))
    for path in written:
        click.echo(f"wrote {path}", err=True)
    if written:
        click.echo(f"next: bash {out / 'submit.sh'}" + (" (docs/clusters.md: \"A study on a cluster\")" if emit == "k8s" else ""),
                   err=True)


def _emit(engine, settings, study, shards, resources, pilot_db, prices_file, out) -> tuple[dict, list[Path]]:
    """The plan recorded in DIR/bench.db and the engine's files written beside it."""
    # Refused before anything is written, as credentials in the base URL are: a value no job file may hold.
    resources.check()
    one_line(str(out.resolve()), "out")
    study_commands(study, study.bench)
    memaudit = one_line(_memaudit_command(), "MEMAUDIT_BIN")
    env = settings_env(settings, given("config") or os.environ.get("MEMAUDIT_CONFIG"))
    found, bench_name = run(_plan, settings, study, pilot_db, prices_file, out)
    files = (slurm_files(study, bench_name, shards, resources, env, out, memaudit) if engine == "slurm"
             else k8s_files(study, bench_name, shards, resources, env))
    return found, write_files(out, {**files, "plan.md": _plan_markdown(found) + "\n"})


def _stages(text: str) -> tuple[str, ...]:
    chosen = split_list(text) or []
    unknown = [s for s in chosen if s not in STUDY_COMMANDS]
    if unknown or not chosen:
        raise BadInput(f"--stages takes {', '.join(STUDY_COMMANDS)}; got {text!r}", field="stages")
    return tuple(s for s in STUDY_COMMANDS if s in chosen)


def _plan_markdown(found: dict) -> str:
    lines = ["| run | basis | calls | prompt tokens | completion tokens | on demand | batch |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for run_name, e in found.items():
        lines.append(f"| {run_name} | {e['basis']} | {e['calls']:,} | {e['prompt_tokens']:,} | "
                     f"{e['completion_tokens']:,} | {_usd(e['usd_on_demand'])} | {_usd(e['usd_batch'])} |")
    return "\n".join(lines + _unpriced_lines(list(found.values())))


def _memaudit_command() -> str:
    """The memaudit the jobs run: this one (its environment's), unless MEMAUDIT_BIN says otherwise."""
    import shutil
    import sys

    beside = Path(sys.executable).with_name("memaudit")
    return str(beside) if beside.exists() else shutil.which("memaudit") or "memaudit"


async def _seed_bench(seed, db: Path, ref: str):
    """The study's benchmark in the seed store: `sample` or a release folder as resolved there, an
    imported name copied from --db."""
    from memaudit.bench.instances import SAMPLE_NAME, resolve_bench
    from memaudit.store import open_store

    if ref == SAMPLE_NAME or Path(ref).is_dir() or await seed.benchmarks.load(ref) is not None:
        return await resolve_bench(seed, ref)
    async with open_store(db, create=False) as store:
        bench = await resolve_bench(store, ref)
    await seed.benchmarks.save(bench)
    return bench


async def _plan(settings, study, pilot_db, prices_file, out: Path | None = None):
    """(estimates, the benchmark's name): recorded in --db, or with --emit in DIR/bench.db, the seed
    of every shard's store."""
    from contextlib import AsyncExitStack

    from memaudit.bench.instances import resolve_bench
    from memaudit.store import open_store
    from memaudit.study.cost import load_prices
    from memaudit.study.emit import SEED_STORE
    from memaudit.study.plan import plan_study

    prices = load_prices(prices_file)
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(open_store(settings.db if out is None else out / SEED_STORE))
        pilot = await stack.enter_async_context(open_store(pilot_db)) if pilot_db else None
        bench = await (resolve_bench(store, study.bench) if out is None else _seed_bench(store, settings.db,
                                                                                          study.bench))
        return await plan_study(store, settings, bench, study, pilot=pilot, prices=prices), bench.name


COMMANDS = [merge, cost, plan]
