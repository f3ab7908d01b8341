"""`import-release`: a published release directory (benchmark plus run records) into the store.

Runs are named after their directories; every metric is later recomputed from the raw per-user
records imported here (episodes, per-turn preference scores, final stores, per-target scores,
attribution labels) — aggregate `*_merged.json` reports are never read. Files are parsed one user
at a time and the rows go to the store in one streamed transaction: a damaged file anywhere
raises BadInput naming it, and nothing is written. A release may come from anyone: run and user
directory names must be safe ids, and every file is read only after its resolved path (symlinks
followed) is checked to lie under the release root.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from memaudit.adapters.registry import system_of
from memaudit.bench.files import read_json
from memaudit.bench.instances import load_release_benchmark
from memaudit.errors import BadInput, StoreError
from memaudit.ids import check_id, inside
from memaudit.llm.keys import text_hash
from memaudit.store import RunConfig, Statement, Store
from memaudit.types import DEFAULT_VARIANT, Attribution, Benchmark, Episode, Reconstruction, Turn

RETRIEVE_SUFFIX = "_retrieve"
ORACLE_DIR = "_task_design_oracle"
RETRIEVE_K = 5  # the published retrieve reports used top-5
END_REASONS = ("satisfied", "max_turns", "failed")
STATUSES = ("ok", "overflow", "failed")
EPISODE_FILE = re.compile(r"episode_(\d+)\.json")


async def import_release(store: Store, path: str | Path, *, name: str | None = None,
                         tasks_dir: str | None = None, commit_every: int | None = None) -> list[str]:
    """Import the benchmark and every run of a release directory; returns the run ids. One
    transaction, unless `commit_every` (bytes, Store.write_stream) says the caller makes it atomic."""
    root = Path(path)
    # Published runs are imported as recorded: task coverage gaps are the protocol's `no_targeted_task`.
    bench = load_release_benchmark(root, name=name, tasks_dir=tasks_dir, coverage=False)
    stored = await store.benchmarks.load(bench.name)
    if stored is not None and stored != bench:
        raise BadInput(f"the store already holds a different benchmark named {bench.name!r}; "
                       "import under another name with --name", file=str(root))
    runs = release_runs(root)
    for run in runs:
        if await store.runs.get(run) is not None:
            raise BadInput(f"run {run!r} is already in the store", file=str(root))
    where: dict[str, str] = {}
    try:
        await store.write_stream(_statements(store, root, bench, runs, where, save_bench=stored is None),
                                 commit_every=commit_every)
    except StoreError as exc:  # a refused row: e.g. a turn number or a dimension given twice in one record
        if not exc.conflict:
            raise
        raise BadInput(exc.detail, file=where.get("file", str(root))) from None
    return runs


def release_runs(root: Path) -> list[str]:
    """Run ids of a release: directories of history/, memory/ and output/ (a `_retrieve` report
    belongs to its base run)."""
    runs: set[str] = set()
    for top in ("history", "memory", "output"):
        if inside(root, root / top, label=top).is_dir():
            for d in (root / top).iterdir():
                if d.is_dir() and d.name != ORACLE_DIR:
                    label = f"{top}/{d.name}"
                    inside(root, d, label=label)
                    runs.add(check_id(d.name.removesuffix(RETRIEVE_SUFFIX) if top == "output" else d.name,
                                      "run id", file=label))
    return sorted(runs)


def _statements(store: Store, root: Path, bench: Benchmark, runs: list[str], where: dict[str, str], *,
                save_bench: bool) -> Iterator[list[Statement]]:
    """Row batches, one per file (one per user directory for episodes); `where["file"]` names the
    source of the batch being written, for errors the database raises."""
    if save_bench:
        yield store.benchmarks.statements(bench)
    for run in runs:
        users = _user_dirs(root, f"history/{run}", bench)
        ran = {u: len(list((root / "history" / run / u).glob("episode_*.json"))) for u in users}
        most = max(ran.values(), default=0)
        # A run of the first N tasks only (ours, exported with --tasks N) stays marked partial.
        partial = 0 < most < min((len(bench.tasks.get(u, ())) for u in users), default=0)
        config = RunConfig(users, most if partial else None, max_turns=25, k=RETRIEVE_K, tag=None,
                           imported_from=root.resolve().name)
        yield [store.runs.statement(run, system_of(run), bench.name, origin="import", config=config.to_json())]
        for user in users:
            where["file"] = f"history/{run}/{user}"
            yield _episode_statements(store, root, run, user, bench)
        dump_evidence, snapshot_tasks = {}, {}
        for user in _user_dirs(root, f"memory/{run}", bench):
            snapshot_tasks[user] = ran.get(user) or len(bench.tasks.get(user, ()))
            statement, dump_evidence[user] = _snapshot_statement(store, root, run, user, snapshot_tasks[user])
            yield [statement]
        for mode, k, out_dir in (("dump_all", 0, run), ("retrieve", RETRIEVE_K, run + RETRIEVE_SUFFIX)):
            for user in _user_files(root, f"output/{out_dir}/recon_judge", bench):
                where["file"] = label = f"output/{out_dir}/recon_judge/{user}.json"
                yield _reconstruction_statements(store, root, label, run, mode, k, user, dump_evidence.get(user),
                                                 snapshot_tasks.get(user))
            for user in _user_files(root, f"output/{out_dir}/attribution", bench):
                where["file"] = label = f"output/{out_dir}/attribution/{user}.json"
                yield _attribution_statements(store, root, label, run, mode, k, user)
    for user in _user_files(root, f"output/{ORACLE_DIR}", bench):
        yield _oracle_statements(store, root, f"output/{ORACLE_DIR}/{user}.json", user, bench)


def _read(root: Path, label: str, user: str):
    """The JSON file at `label` (relative to the release root), once its real path is under the root."""
    return read_json(inside(root, root / label, label=label, user=user), label, user)


def _user_dirs(root: Path, label: str, bench: Benchmark) -> list[str]:
    base = inside(root, root / label, label=label)
    names = sorted(d.name for d in base.iterdir() if d.is_dir()) if base.is_dir() else []
    _known_users(names, label, bench)
    for name in names:
        inside(root, root / label / name, label=f"{label}/{name}", user=name)
    return names


def _user_files(root: Path, label: str, bench: Benchmark) -> list[str]:
    base = inside(root, root / label, label=label)
    names = sorted(p.stem for p in base.glob("*.json")) if base.is_dir() else []
    _known_users(names, label, bench)
    return names


def _known_users(names: list[str], label: str, bench: Benchmark) -> None:
    """Only users of the benchmark, whose ids were checked when it was read, name files here."""
    known = {u.id for u in bench.users}
    for name in names:
        if name not in known:
            raise BadInput(f"{name[:40]!r} is not a user of benchmark {bench.name!r}", file=f"{label}/{name[:40]}",
                           user=name[:40])


def _episode_statements(store: Store, root: Path, run: str, user: str, bench: Benchmark) -> list[Statement]:
    n_tasks = len(bench.tasks.get(user, ()))
    rows: list[Statement] = []
    for path in sorted((root / "history" / run / user).glob("episode_*.json"), key=_episode_number):
        index = _episode_number(path)
        label = f"history/{run}/{user}/{path.name}"
        if not 1 <= index <= n_tasks:
            raise BadInput(f"episode {index} but the user has {n_tasks} tasks", file=label, user=user)
        data = _object(_read(root, label, user), label, user)
        per_pref = _per_pref(root, f"pref_judge/{run}/{user}/{path.name}", user)
        end_reason = data.get("end_reason")
        # Any label is kept as the release wrote it (A counts only `satisfied`); a missing one is damage.
        if not isinstance(end_reason, str) or not end_reason:
            raise BadInput(f"{end_reason!r}, expected a label such as {', '.join(END_REASONS)}", file=label,
                           user=user, field="end_reason")
        turns = data.get("turns")
        if not isinstance(turns, list):
            raise BadInput("missing list of turns", file=label, user=user, field="turns")
        episode = Episode(run, user, index, str(data.get("task") or ""),
                          [_turn(raw, i, label, user, per_pref) for i, raw in enumerate(turns)], end_reason,
                          data.get("error"))
        rows += store.episodes.statements(episode, _number(data.get("final_preference_score"), label, user,
                                                          "final_preference_score"))
    return rows


def _turn(raw, position: int, label: str, user: str, per_pref: dict[int, list]) -> Turn:
    field = f"turns[{position}]"
    raw = _object(raw, label, user, field)
    agent = raw.get("agent_response")
    if not isinstance(agent, str):
        raise BadInput("missing text", file=label, user=user, field=f"{field}.agent_response")
    index = raw.get("turn", position + 1)
    simulator = raw.get("user_simulator") or {}
    evaluator = raw.get("preference_evaluator") or {}
    return Turn(index, agent, simulator.get("feedback_type"), simulator.get("text"),
                _number(evaluator.get("score"), label, user, f"{field}.preference_evaluator.score"),
                per_pref.get(index, []), bool(simulator.get("fallback", False)), _change(raw, label, user, field))


def _change(raw: dict, label: str, user: str, field: str) -> dict | None:
    """The bank change disclosed on a turn of an evolving benchmark's export (published: none)."""
    change = raw.get("change")
    if change is None:
        return None
    if not (isinstance(change, dict) and isinstance(change.get("dimension"), str)
            and isinstance(change.get("version"), int) and not isinstance(change.get("version"), bool)):
        raise BadInput("expected {dimension, version}", file=label, user=user, field=f"{field}.change")
    return {"dimension": change["dimension"], "version": change["version"]}


def _per_pref(root: Path, label: str, user: str) -> dict[int, list]:
    """Per-turn per-preference judgments of the pref_judge record, if the release has one."""
    if not (root / label).exists():
        return {}
    data = _object(_read(root, label, user), label, user)
    return {t.get("turn"): t.get("per_pref") or [] for t in data.get("turns") or [] if isinstance(t, dict)}


def _snapshot_statement(store: Store, root: Path, run: str, user: str, last_task: int) -> tuple[Statement, dict]:
    """The final store as a snapshot after the user's last task; returns the evidence a dump_all
    row of the user records too (items and their total content characters)."""
    label = f"memory/{run}/{user}/memories.json"
    data = _object(_read(root, label, user), label, user)
    memories = data.get("memories")
    if not isinstance(memories, list) or not all(isinstance(m, dict) for m in memories):
        raise BadInput("missing list of memory objects", file=label, user=user, field="memories")
    evidence = {"n_items": len(memories), "chars": sum(len(str(m.get("content", ""))) for m in memories)}
    return store.episodes.snapshot_statement(run, user, last_task, {"items": memories}, memories), evidence


def _details(root: Path, label: str, user: str) -> list[dict]:
    data = _object(_read(root, label, user), label, user)
    details = data.get("details")
    if not isinstance(details, list):
        raise BadInput("missing list of details", file=label, user=user, field="details")
    for i, detail in enumerate(details):
        detail = _object(detail, label, user, f"details[{i}]")
        for key in ("category", "dimension"):
            if not isinstance(detail.get(key), str):
                raise BadInput("missing text", file=label, user=user, field=f"details[{i}].{key}")
    return details


def _reconstruction_statements(store: Store, root: Path, label: str, run: str, mode: str, k: int, user: str,
                               dump_evidence: dict | None, snapshot_task: int | None) -> list[Statement]:
    """The release's scores, read from the imported final store (`snapshot_task`) by construction."""
    rows = []
    for i, d in enumerate(_details(root, label, user)):
        score = _number(d.get("score"), label, user, f"details[{i}].score")
        predicted = d.get("predicted")
        # Our own exports say the status; published records only imply it.
        status = d.get("status") if d.get("status") in STATUSES else (
            "ok" if isinstance(predicted, str) and score is not None else "failed")
        evidence = {"items": d.get("retrieved_memories") or []} if mode == "retrieve" else (dump_evidence or {})
        recon = Reconstruction(
            run, mode, k, DEFAULT_VARIANT, user, d["category"], d["dimension"], str(d.get("explanation") or ""),
            str(d.get("ground_truth") or ""), evidence, predicted if isinstance(predicted, str) else None,
            d.get("slot_fill_reason"), score, d.get("judge_reason"), status,
            d.get("error") or (None if status == "ok" else "imported record without a prediction or score"),
            snapshot_task)
        rows.append(store.scores.reconstruction_statement(recon, replace=False))
    return rows


def _attribution_statements(store: Store, root: Path, label: str, run: str, mode: str, k: int,
                            user: str) -> list[Statement]:
    rows = []
    for i, d in enumerate(_details(root, label, user)):
        attribution = _object(d.get("attribution"), label, user, f"details[{i}].attribution")
        category = attribution.get("category")
        if not isinstance(category, str):
            raise BadInput("missing label", file=label, user=user, field=f"details[{i}].attribution.category")
        rows.append(store.attributions.statement(Attribution(
            run, mode, k, DEFAULT_VARIANT, user, d["category"], d["dimension"], category,
            _number(attribution.get("score", d.get("score")), label, user, f"details[{i}].attribution.score"),
            attribution.get("stages") or [], attribution.get("ep_index"), str(attribution.get("note") or "")),
            replace=False))
    return rows


def _oracle_statements(store: Store, root: Path, label: str, user: str, bench: Benchmark) -> list[Statement]:
    """Stage-0 verdicts, keyed like the ones attribution writes: by the targeted task's text hash."""
    task_of = {t.target_dimension: t.text for t in bench.tasks.get(user, ())}
    rows = []
    for dimension, verdict in sorted(_object(_read(root, label, user), label, user).items()):
        verdict = _object(verdict, label, user, dimension)
        if dimension not in task_of:
            continue  # a verdict is keyed by its task's text; without a targeted task it keys nothing
        can_invite = verdict.get("can_invite")
        key = (bench.name, user, dimension, text_hash(task_of[dimension]),
               can_invite if isinstance(can_invite, bool) else None, str(verdict.get("reason") or ""))
        rows.append(store.attributions.oracle_statement(*key, replace=True))
        rows.append(store.attributions.imported_oracle_statement(*key))
    return rows


def _episode_number(path: Path) -> int:
    match = EPISODE_FILE.fullmatch(path.name)
    if match is None:
        raise BadInput("expected episode_<i>.json", file=str(path))
    return int(match.group(1))


def _object(value, label: str, user: str, field: str | None = None) -> dict:
    if not isinstance(value, dict):
        raise BadInput("expected a JSON object", file=label, user=user, field=field)
    return value


def _number(value, label: str, user: str, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadInput(f"expected a number or null, got {value!r}", file=label, user=user, field=field)
    return float(value)
