"""`export`: a benchmark and our runs written in the published release layout, so published tooling
(and our own `import-release`) can read them: into a directory, or into one compressed archive
(release/sinks.py). Deterministic bytes: sorted keys, stable order, and a fixed value where the
layout asks for a time, so identical runs export identical files. Memory is bounded by one user:
runs are read and written one user at a time.

A shared store may hold ids nobody checked: every run and user id is checked as a safe id before
anything is written, and every file's resolved path (symlinks already in the output directory
followed) must stay under it."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from memaudit.bench.export import EXPORT_TASKS_DIR, check_users, write_benchmark_to
from memaudit.bench.history import user_at
from memaudit.bench.instances import BANKS_FILE, TASKS_ROOT
from memaudit.errors import BadInput
from memaudit.ids import check_id, refuse_links_out
from memaudit.llm.keys import text_hash
from memaudit.release.importer import ORACLE_DIR, RETRIEVE_SUFFIX
from memaudit.release.sinks import ArchiveSink, DirectorySink
from memaudit.scratch import owned_prefix, remove_stale
from memaudit.store import Run, Store, select_runs
from memaudit.tables.metrics import user_recovery
from memaudit.types import Benchmark, Reconstruction

# The top-level entries an export writes: a folder holding only these is an earlier export.
EXPORT_TOP = {BANKS_FILE.split("/")[0], TASKS_ROOT, "history", "pref_judge", "memory", "output"}


async def export_runs(store: Store, runs: list[str] | None, out_dir: str | Path, *,
                      archive: bool = False) -> list[str]:
    """Write `runs` (default: every run in the store) and their benchmark into the folder `out_dir`,
    or with `archive` into that one .tar.gz file; returns the run ids.

    Atomic: the release is written into a hidden sibling (folder or file) and renamed into place
    once whole, so a killed export never leaves a partial release at `out_dir` (a published release
    carries no completeness marker: import cannot tell). An earlier export there is replaced whole,
    so the files of runs not exported this time do not linger."""
    if archive:
        return await _export_archive(store, runs, Path(out_dir))
    out = Path(out_dir)
    _check_replaceable(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{out.name}.partial-"
    remove_stale(out.parent, prefix)
    staging = Path(tempfile.mkdtemp(prefix=owned_prefix(prefix), dir=out.parent))
    staging.chmod(0o755)  # mkdtemp's 0700 would make the release private once renamed
    try:
        exported = await _export_into(store, runs, DirectorySink(staging))
        _swap_in(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return exported


async def _export_archive(store: Store, runs: list[str] | None, file: Path) -> list[str]:
    if file.is_symlink() or file.is_dir():
        raise BadInput("--archive names a folder or a link; give a new file or an earlier archive", file=str(file))
    file.parent.mkdir(parents=True, exist_ok=True)
    sink = ArchiveSink(file)
    try:
        exported = await _export_into(store, runs, sink)
    except BaseException:
        sink.abort()
        raise
    sink.close()
    return exported


def _check_replaceable(out: Path) -> None:
    """`out` may be new, empty, or an earlier export; anything else is not ours to replace."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise BadInput("--out exists and is not a folder; give a new or empty folder", file=str(out))
    if out.is_dir():
        refuse_links_out(out)  # a planted link says someone meant the export to land elsewhere
        foreign = sorted(p.name for p in out.iterdir() if p.name not in EXPORT_TOP)
        if foreign:
            raise BadInput(f"--out holds {foreign[0]!r}, which no export writes: give a new or empty folder (an "
                           "earlier export there is replaced whole)", file=str(out))


def _swap_in(staging: Path, out: Path) -> None:
    """Put the finished release at `out`, moving an earlier one aside first and deleting it after."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=owned_prefix(f".{out.name}.partial-"), dir=out.parent))
        os.rename(out, old / "old")
    os.rename(staging, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


async def _export_into(store: Store, runs: list[str] | None, sink) -> list[str]:
    chosen = await select_runs(store, runs or None)
    if not chosen:
        raise BadInput("the store holds no runs to export", field="runs")
    benches = sorted({run.bench for run in chosen})
    if len(benches) > 1:
        raise BadInput(f"the runs use several benchmarks ({', '.join(benches)}); export one benchmark's runs "
                       "at a time with --runs", field="runs")
    bench = await store.benchmarks.load(benches[0])
    known = {u.id for u in bench.users}  # their ids are checked by check_users
    for run in chosen:
        check_id(run.run, "run id", field="runs")
        stray = await store.episodes.users_with_records(run.run) - known
        if stray:
            raise BadInput(f"run {run.run} holds records of {len(stray)} user(s) not in benchmark {bench.name}, "
                           f"e.g. {sorted(stray)[0][:40]!r}", field="runs")
    check_users(bench)
    write_benchmark_to(bench, sink)
    for run in chosen:
        await _export_run(store, run, bench, sink)
    await _export_oracle(store, bench, sink)
    return [run.run for run in chosen]


async def _export_run(store: Store, recorded: Run, bench: Benchmark, sink) -> None:
    run = recorded.run
    with_records = await store.episodes.users_with_records(run)
    for user in bench.users:
        if user.id in with_records:
            await _export_episodes(store, run, user, sink)
    for user_id in await store.episodes.snapshot_users(run):
        items = (await store.episodes.last_snapshot(run, user_id))["items"]
        sink.write(f"memory/{run}/{user_id}/memories.json", {"num_memories": len(items), "memories": items})
    k = recorded.config.k
    for mode, mode_k, out_dir in (("dump_all", 0, run), ("retrieve", k, run + RETRIEVE_SUFFIX)):
        for user in bench.users:
            await _export_mode(store, run, mode, mode_k, user, sink, f"output/{out_dir}")


async def _export_episodes(store: Store, run: str, user, sink) -> None:
    final_scores = await store.episodes.final_preferences(run, user.id)
    for ep in await store.episodes.load(run, user.id):
        name = f"{ep.user_id}/episode_{ep.task_index}.json"
        record = {"user_id": ep.user_id, "task": ep.task, "ground_truth": None, "end_reason": ep.end_reason,
                  "final_preference_score": final_scores[(ep.user_id, ep.task_index)],
                  "turns": [_turn_record(t) for t in ep.turns]}
        if ep.error is not None:
            record["error"] = ep.error
        sink.write(f"history/{run}/{name}", record)
        prefs = user_at(user, ep.task_index).entries("assistance_preference")  # as judged then
        sink.write(f"pref_judge/{run}/{name}", {
            "user_id": ep.user_id, "task": ep.task,
            "prefs": [{"idx": i, "dimension": e.dimension, "short": e.short, "explanation": e.explanation}
                      for i, e in enumerate(prefs)],
            "turns": [{"turn": t.index, "agent_response": t.assistant, "score": t.preference_score, "summary": "",
                       "per_pref": t.per_pref} for t in ep.turns]})


async def _export_mode(store: Store, run: str, mode: str, k: int, user, sink, folder: str) -> None:
    """One user's recon_judge (and attribution) file of one pass."""
    recons = await store.scores.load(run, mode, k=k, user_id=user.id)
    if not recons:
        return
    attributions = {a.dimension: a for a in await store.attributions.load(run, mode, user_id=user.id) if a.k == k}
    order = {e.dimension: i for i, e in enumerate(user.bank)}
    records = sorted(recons, key=lambda r: (order.get(r.dimension, len(order)), r.dimension))
    details = [_recon_detail(r) for r in records]
    recovery = user_recovery(user.id, [(r.category, r.score, r.status) for r in records])
    sink.write(f"{folder}/recon_judge/{user.id}.json", {
        "user_id": user.id, "per_category": recovery.categories, "overall": recovery.B, "details": details})
    _write_attributions(user.id, records, details, attributions, sink, folder)


def _write_attributions(user_id: str, records: list[Reconstruction], details: list[dict], attributions: dict,
                        sink, folder: str) -> None:
    attributed = []
    for r, detail in zip(records, details):
        a = attributions.get(r.dimension)
        if a is not None:
            attributed.append({**detail, "attribution": {"category": a.label, "score": a.score, "stages": a.stages,
                                                         "ep_index": a.ep_index, "note": a.note}})
    if attributed:
        counts: dict[str, int] = {}
        for d in attributed:
            counts[d["attribution"]["category"]] = counts.get(d["attribution"]["category"], 0) + 1
        sink.write(f"{folder}/attribution/{user_id}.json", {
            "user_id": user_id, "tasks_dir": EXPORT_TASKS_DIR, "counts": counts, "details": attributed})


def _recon_detail(r: Reconstruction) -> dict:
    detail = {"category": r.category, "dimension": r.dimension, "explanation": r.explanation,
              "ground_truth": r.ground_truth, "predicted": r.label, "slot_fill_reason": r.reason, "score": r.score,
              "judge_reason": r.judge_reason, "scoring_mode": r.mode, "status": r.status}
    if r.mode == "retrieve":
        detail["retrieved_memories"] = r.evidence.get("items", [])
    if r.error is not None:
        detail["error"] = r.error
    return detail


async def _export_oracle(store: Store, bench: Benchmark, sink) -> None:
    for user in bench.users:
        verdicts = {}
        for task in bench.tasks.get(user.id, ()):
            verdict = await store.attributions.oracle(bench.name, user.id, task.target_dimension, text_hash(task.text))
            if verdict is not None:
                verdicts[task.target_dimension] = verdict
        if verdicts:
            sink.write(f"output/{ORACLE_DIR}/{user.id}.json", verdicts)


def _turn_record(t) -> dict:
    simulator = {"feedback_type": t.feedback_type, "text": t.user_text, "is_done": t.feedback_type == "satisfied"}
    if t.fallback:
        simulator["fallback"] = True
    record = {"turn": t.index, "agent_response": t.assistant, "user_simulator": simulator,
              "preference_evaluator": {"score": t.preference_score}}
    if t.change is not None:  # evolving banks: the bank change the user disclosed on this turn
        record["change"] = {"dimension": t.change["dimension"], "version": t.change["version"]}
    return record
