"""Recovery scoring (PROTOCOL §5): read the final memory, fill every hidden slot from it, judge
each filled value against the hidden one.

    read operator (dump_all | retrieve top-k)  ->  slot-filling reader  ->  recovery judge

One reconstruction row per (run, mode, k, variant, user, dimension), written together with the
calls it used. Existing rows are skipped (resume). A model failure becomes a `failed` row with
its error, a prompt that does not fit the reader becomes an `overflow` row: never a silent 0.

Scoring may run while a rollout is still writing the run: only users whose planned episodes have
all finished are scored (the others are named, with the reason), each row records the snapshot it
read, and a row whose snapshot is no longer the user's final one is deleted and scored again.
"""
from __future__ import annotations

import copy
import weakref
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Awaitable, Callable, ContextManager

import anyio

from memaudit.adapters.base import AdapterContext, MemoryAdapter
from memaudit.adapters.boundary import open_adapter
from memaudit.adapters.registry import get_adapter
from memaudit.ask import ask
from memaudit.bench.history import user_for_run
from memaudit.errors import BadInput, ContextOverflow, InvalidOutput, failure_note
from memaudit.llm.client import LLM
from memaudit.llm.tokens import counting
from memaudit.prompts import Prompt, category_guides, is_published_pack, load_prompt, prompt_pack
from memaudit.provenance import PROTOCOL_VERSION, prompts_provenance, role_provenance
from memaudit.roles import RECOVERY_JUDGE, ROLE_SPECS, SLOT_FILL, role_group
from memaudit.runtime import Runtime
from memaudit.scoring.jobs import run_all
from memaudit.store import PassConfig, Rescore, Run, Store, dumps_indented
from memaudit.scoring.panel import Panel
from memaudit.shards import WHOLE, Shard
from memaudit.types import (CATEGORY_DEFINITIONS, DEFAULT_VARIANT, MODES, BankEntry, Benchmark, Reconstruction, User,
                            for_reader)

DIMS = ("all", "targeted")
UNKNOWN = "unknown"
UNKNOWN_REASON = "the reader answered unknown: scored 0 without a judge call"
# The reader gets memory as the published reader did: indented JSON, each item's fields in their
# native order (the shape changes token counts, and so where dump_all overflows).
MEMORY_JSON = "indent2-native-order"
EMPTY_MEMORY = dumps_indented([])
EMPTY_REASON = "the memory surfaced no items, so no value can be supported"
# The roles a scoring pass calls, besides a memory system's own calls during retrieve (under --batch
# every one goes through the batch path: memaudit/llm/batch.py).
ROLES_CALLED = (SLOT_FILL, RECOVERY_JUDGE)
# The scorer field of a pass that filled and judged every target (`Scorer.every_target`).
EVERY_TARGET = "every_target_judged"


def with_model(llm: LLM, role: str, model: str | None) -> LLM:
    """A client whose `role` calls go to `model` instead of the configured one (frozen rescoring)."""
    if model is None:
        return llm
    settings = llm.settings
    if not settings.role(role).base_urls:  # the embedded server serves its one bundled model only
        raise BadInput(f"another model for {role} needs an endpoint: give --base-url or a [roles] section "
                       "in --config", field="model")
    group = role_group(role)
    section = {**settings.role_sections.get(group, {}), "model": model}
    clone = copy.copy(llm)
    clone.settings = replace(settings, role_sections={**settings.role_sections, group: section})
    return clone


def with_prompts(rt: Runtime, prompts_dir: str | None) -> Runtime:
    """A runtime whose calls use the prompt directory `prompts_dir` (replay of a pass recorded with
    another `--prompts`); the same store, cache and transport."""
    if prompts_dir is None or Path(prompts_dir) == Path(rt.settings.prompts_dir):
        return rt
    settings = replace(rt.settings, prompts_dir=Path(prompts_dir))
    llm = copy.copy(rt.llm)
    llm.settings = replace(llm.settings, prompts_dir=Path(prompts_dir))
    return replace(rt, settings=settings, llm=llm)


# -- who reads and who judges ----------------------------------------------------------------
@dataclass(frozen=True)
class Scorer:
    """The reader and the judges of a scoring pass: clients (models), prompt files and the category
    guides of the reader's prompt directory. The panel grades (memaudit/scoring/panel.py): named
    judges, or the configured judge (`judge`) as a panel of one."""
    reader: LLM
    judge: LLM
    reader_prompt: Prompt
    judge_prompt: Prompt
    guides: dict
    panel: Panel
    # The published scorer filled and judged every target, an empty memory and an `unknown` label
    # included; memaudit's own prompts score both 0 without a call (docs/fidelity.md S4).
    every_target: bool = False

    @classmethod
    def configured(cls, llm: LLM, panel: Panel | None = None, *, judge: LLM | None = None,
                   every_target: bool | None = None) -> "Scorer":
        """`llm` reads; `panel` grades (None: the configured judge alone), asking the configured judge
        through `judge` (default `llm`). `every_target` None: as published with the published pack
        (a recorded pass says what it did: `replay`)."""
        judge = judge or llm
        prompts_dir = llm.settings.prompts_dir
        if every_target is None:
            every_target = is_published_pack(prompts_dir)
        return cls(llm, judge, load_prompt(ROLE_SPECS[SLOT_FILL].prompt, prompts_dir),
                   load_prompt(ROLE_SPECS[RECOVERY_JUDGE].prompt, prompts_dir), category_guides(prompts_dir),
                   (panel or Panel.single(judge)).asking(judge), every_target)

    def describe(self) -> dict:
        reader, judge = ROLE_SPECS[SLOT_FILL], ROLE_SPECS[RECOVERY_JUDGE]
        panel = {} if self.panel.solo else self.panel.describe()
        judges = {} if self.panel.solo else self.panel.provenance()
        # recorded only when set: passes scored before it (and every pass without the pack) lack it
        every = {EVERY_TARGET: True} if self.every_target else {}
        return {**panel, **every, "reader_model": self.reader.settings.role(SLOT_FILL).model,
                "reader_prompt": self.reader_prompt.sha256,
                "judge_model": self.judge.settings.role(RECOVERY_JUDGE).model,
                "judge_prompt": self.judge_prompt.sha256,
                "prompts": prompts_provenance(self.reader.settings.prompts_dir),
                "provenance": {"protocol": PROTOCOL_VERSION, "memory_json": MEMORY_JSON, "roles": {
                    SLOT_FILL: role_provenance(self.reader.settings, SLOT_FILL, reader.temperature,
                                                 reader.max_tokens),
                    RECOVERY_JUDGE: role_provenance(self.judge.settings, RECOVERY_JUDGE, judge.temperature,
                                                      judge.max_tokens)},
                    **({"judges": judges} if judges else {})}}


def retrieval_query(category: str, dimension: str, guides: dict[str, str] = CATEGORY_DEFINITIONS) -> str:
    """Axis-only and user-agnostic: the dimension's words and the category's guide (the prompt
    directory's `category_guides`, see memaudit/prompts.py), never anything from the bank entry.
    The published runner's query has this shape with its own guides (docs/fidelity.md S3)."""
    return f"What best describes the user's {dimension.replace('_', ' ')}? {guides[category]}"


def is_unknown(label: str) -> bool:
    return label.strip().strip(".").lower() == UNKNOWN


# -- the memory one user left ------------------------------------------------------------------
@dataclass(eq=False)  # one user's memory, itself the borrower of its worker's place
class UserMemory:
    items: list[dict]
    block: str                       # the whole store, serialised with native fields
    # For retrieve: restored on first use (`opened`), closed after its last (`used`): a library in
    # its own environment holds a worker process while restored, at most --library-workers at once.
    adapter: MemoryAdapter | None
    published: bool = False          # results shown as the published scorer showed them (the pack)
    restore: Callable[[], Awaitable[None]] | None = None
    aside: Callable[[], ContextManager] | None = None  # collects calls that belong to no row
    places: anyio.CapacityLimiter | None = None  # None: no worker to bound
    uses: int = 0                    # the retrieve reads still to come
    restored: bool = False
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def opened(self) -> MemoryAdapter:
        async with self.lock:
            if not self.restored:
                if self.places is not None:
                    await self.places.acquire_on_behalf_of(self)
                try:
                    await self.restore()
                except BaseException:
                    if self.places is not None:
                        self.places.release_on_behalf_of(self)
                    raise
                self.restored = True
        return self.adapter

    async def used(self) -> None:
        """One read done; after the last, the adapter is closed (its worker stops)."""
        self.uses -= 1
        if self.uses == 0 and self.restored:
            with anyio.CancelScope(shield=True):
                await self.adapter.close()
            if self.places is not None:
                self.places.release_on_behalf_of(self)

    async def surface(self, recon: Reconstruction, guides: dict) -> tuple[str, dict]:
        """The read operator for the row's target: (memory text for the reader, evidence for the row)."""
        if recon.mode == "dump_all":
            return self.block, {"n_items": len(self.items), "chars": len(self.block)}
        query = retrieval_query(recon.category, recon.dimension, guides)
        with self.aside():  # the restore's calls (answered from the cache) belong to no row
            adapter = await self.opened()
        found = [adapter.result_json(item, published=self.published) for item in await adapter.search(query, recon.k)]
        return dumps_indented(found), {"items": found}


_places: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def worker_places(rt: Runtime) -> anyio.CapacityLimiter:
    """The users of libraries in their own environments restored at once in this command."""
    if rt.llm not in _places:
        _places[rt.llm] = anyio.CapacityLimiter(rt.settings.library_workers)
    return _places[rt.llm]


async def open_memory(rt: Runtime, run: Run, user_id: str, *, with_adapter: bool, uses: int = 1) -> UserMemory:
    """A user's memory; `with_adapter`: its adapter too, for `uses` reads."""
    snapshot = await rt.store.episodes.last_snapshot(run.run, user_id)
    items = snapshot["items"] if snapshot else []
    memory = UserMemory(items, dumps_indented([for_reader(item) for item in items]), None,
                        is_published_pack(rt.settings.prompts_dir))
    if with_adapter:
        adapter = open_adapter(run.system, AdapterContext(rt.llm, rt.embedder, scope=f"{run.run}/{user_id}"),
                               rt.settings.db.parent)

        async def restore() -> None:
            if run.origin == "import":
                await adapter.load_items(items)
            elif snapshot is not None:
                await adapter.restore(snapshot["state"])
        own_environment = adapter.bounded_users
        memory.adapter, memory.restore, memory.uses, memory.aside = adapter, restore, uses, rt.llm.collect
        memory.places = worker_places(rt) if own_environment else None
    return memory


# -- one target ------------------------------------------------------------------------------
def reader_window(rt: Runtime, context_window: int | None) -> int | None:
    """The reader's context window: `--context-window`, else the slot_fill role's configured one."""
    return context_window if context_window is not None else rt.settings.role(SLOT_FILL).context_window


async def fill_and_judge(scorer: Scorer, recon: Reconstruction, memory_text: str,
                         window: int | None) -> Reconstruction:
    """Slot-fill from `memory_text`, then judge; the row's status says how it ended."""
    if memory_text == EMPTY_MEMORY and not scorer.every_target:  # nothing can support a value: unknown
        return replace(recon, label=UNKNOWN, reason=EMPTY_REASON, score=0.0, judge_reason=UNKNOWN_REASON,
                       status="ok")
    values = {"memory": memory_text, "category": recon.category,
              "definition": scorer.guides[recon.category], "dimension": recon.dimension}
    if window:  # the server's own count; without one, the server's context-length error decides
        tokens = await scorer.reader.count_tokens(SLOT_FILL, scorer.reader_prompt.render(**values))
        if tokens is not None and tokens > window:
            return replace(recon, score=0.0, status="overflow",
                           error=failure_note(ContextOverflow(SLOT_FILL, tokens, window)))
    try:
        fill = await ask(scorer.reader, SLOT_FILL, prompt=scorer.reader_prompt,
                         seed_parts=(recon.user_id, recon.dimension), **values)
    except ContextOverflow as exc:
        return replace(recon, score=0.0, status="overflow", error=failure_note(exc))
    except InvalidOutput as exc:  # an EndpointError (misconfigured, unreachable) ends the command
        return replace(recon, status="failed", error=failure_note(exc))
    return await judge(scorer, replace(recon, label=fill.data["label"].strip(), reason=fill.data["reason"]))


async def judge(scorer: Scorer, recon: Reconstruction) -> Reconstruction:
    """Grade the row's label against its ground truth on the five-level rubric."""
    if is_unknown(recon.label) and not scorer.every_target:
        return replace(recon, score=0.0, judge_reason=UNKNOWN_REASON, status="ok", error=None)
    return await scorer.panel.judge(recon, scorer.judge_prompt)


def artifact_name(recon: Reconstruction) -> str:
    return f"recon:{recon.mode}:{recon.k}:{recon.variant}:{recon.user_id}:{recon.dimension}"


async def save_reconstruction(store: Store, recon: Reconstruction, uses: list) -> None:
    """Queued with the calls it used and committed in the store's next batch: one transaction per
    row would make the one writer the bottleneck at hundreds of calls in flight. A row lost to a
    kill is scored again on resume, from the cache."""
    store.write_later([store.scores.reconstruction_statement(recon), *store.judges.verdict_statements(recon),
                       *store.calls.use_statements(recon.run, artifact_name(recon), uses)])
    await store.maybe_flush()


# -- planning a pass -------------------------------------------------------------------------
@dataclass(frozen=True)
class ReadyUser:
    user: User
    done: set[int]       # task indices with a finished episode
    snapshot_task: int | None  # the final memory snapshot: after this task (None: no memory stored)


async def ready_users(store: Store, run: Run, bench: Benchmark,
                      shard: Shard = WHOLE) -> tuple[list[ReadyUser], list[str]]:
    """Users whose final memory can be scored, in benchmark order, and one line per user skipped.

    A rollout run's user is ready once every episode the run planned for it (its `users` and first
    `tasks` tasks; for a teacher-forced run, those of them its source recorded) has finished: before
    that, its memory is not final. An imported run is complete as recorded: every user with
    episodes is ready."""
    final = await store.episodes.final_snapshot_tasks(run.run)
    planned_users = run.config.users  # None: every user of the benchmark
    ready, skipped = [], []
    for user in bench.users:
        if not shard.holds(run.system, user.id):  # another shard's cell
            continue
        done = await store.episodes.done(run.run, user.id)
        if run.origin == "rollout":
            if planned_users is not None and user.id not in planned_users:
                continue
            planned = {t.index for t in bench.tasks.get(user.id, ())[:run.config.tasks]}
            if run.config.transcripts is not None:
                planned &= await store.episodes.done(run.config.transcripts, user.id)
            if not planned <= done:
                skipped.append(f"{run.run}: user {user.id} skipped: {len(planned & done)} of {len(planned)} "
                               "planned episodes finished (the rollout is still running or was stopped; score "
                               "again once it is complete)")
                continue
        if done:  # the bank its last played task makes the run's targets (an evolving bank's)
            ready.append(ReadyUser(user_for_run(user, max(done)), done, final.get(user.id)))
    return ready, skipped


def targets(bench: Benchmark, user: User, done: set[int], dims: str) -> list[BankEntry]:
    """Every bank entry, or (`targeted`) only those whose targeted task has an episode in the run."""
    if dims == "all":
        return list(user.bank)
    ran = {t.target_dimension for t in bench.tasks.get(user.id, ()) if t.index in done}
    return [e for e in user.bank if e.dimension in ran]


def blank_row(run: str, mode: str, k: int, variant: str, user_id: str, entry: BankEntry) -> Reconstruction:
    """The row before reading: every outcome below replaces status (and fills what it produced)."""
    return Reconstruction(run, mode, k, variant, user_id, entry.category, entry.dimension, entry.explanation,
                          entry.short, {}, None, None, None, None, "failed")


def mode_passes(system: str, modes, ks) -> list[tuple[str, int]]:
    """(mode, k) pairs to score; a system without retrieval has no retrieve mode (tables show null)."""
    passes = []
    for mode in modes:
        if mode == "dump_all":
            passes.append(("dump_all", 0))
        elif get_adapter(system).supports_retrieve:
            passes.extend(("retrieve", k) for k in ks)
    return passes


async def plan_scoring(rt: Runtime, scorer: Scorer, run_id: str, modes, ks, *, context_window: int | None,
                       dims: str, variant: str, rescore: Rescore | None = None) -> tuple[list, list[str]]:
    """Record the run's passes; return one job per target of a ready user that has no fresh row
    yet, and the lines naming the users skipped."""
    run = await rt.store.runs.require(run_id)
    await rt.store.write(rt.store.scores.drop_stale_statements(run_id))
    bench = await rt.store.benchmarks.load(run.bench)
    passes = mode_passes(run.system, modes, ks)
    window = reader_window(rt, context_window)
    described = scorer.describe()
    if window:  # what measures a prompt against the window (memaudit/llm/tokens.py)
        described["overflow_count"] = counting(rt.settings.role(SLOT_FILL).model)
    for mode, k in passes:
        await rt.store.scores.record_pass(run_id, mode, k, variant,
                                          PassConfig(context_window, window, dims, rescore, described))
    jobs = []
    ready, skipped = await ready_users(rt.store, run, bench, rt.shard)
    skipped += unplayed_note(run_id, bench, ready, dims)
    have = await _drop_other_truths(rt, run_id, variant, ready)
    for r in ready:
        user = r.user
        todo = [(mode, k, e) for mode, k in passes for e in targets(bench, user, r.done, dims)
                if (mode, k, user.id, e.dimension) not in have]
        if not todo:
            continue
        reads = sum(1 for m, _, _ in todo if m == "retrieve")
        memory = await open_memory(rt, run, user.id, with_adapter=reads > 0, uses=reads)
        for mode, k, entry in todo:
            row = replace(blank_row(run_id, mode, k, variant, user.id, entry), snapshot_task=r.snapshot_task)
            jobs.append(partial(_score_target, rt, scorer, memory, row, window))
    return jobs, skipped


async def _drop_other_truths(rt: Runtime, run_id: str, variant: str, ready: list[ReadyUser]) -> set[tuple]:
    """Delete the rows of ready users judged against a value that is not their target's truth in
    this run (an evolving entry scored, before issue 33, against its last version; an entry not yet
    true when the run ended), with what was made from them; the keys of the rows kept."""
    truths = await rt.store.scores.truths(run_id, variant)
    runs_truth = {(r.user.id, e.dimension): e.short for r in ready for e in r.user.bank}
    users = {r.user.id for r in ready}
    other = [key for key, truth in truths.items() if key[2] in users and runs_truth.get(key[2:]) != truth]
    if other:
        await rt.store.write(rt.store.scores.drop_statements(run_id, variant, other))
    return truths.keys() - set(other)


def unplayed_note(run_id: str, bench: Benchmark, ready: list[ReadyUser], dims: str) -> list[str]:
    """With --dims all after a partial rollout, the line saying how many entries had no task played."""
    if dims != "all":
        return []
    unplayed, total = 0, 0
    for r in ready:
        targeted = {t.target_dimension for t in bench.tasks.get(r.user.id, ()) if t.index not in r.done}
        played = {e.dimension for e in targets(bench, r.user, r.done, "targeted")}
        unplayed += sum(1 for e in r.user.bank if e.dimension in targeted - played)
        total += len(r.user.bank)
    if not unplayed:
        return []
    return [f"{run_id}: {unplayed} of {total} bank entries had no task played (a partial rollout): attribution "
            "labels them no_targeted_task; `--dims targeted` scores only the entries whose task ran"]


async def _score_target(rt: Runtime, scorer: Scorer, memory: UserMemory, recon: Reconstruction,
                        window: int | None) -> None:
    with rt.llm.collect() as uses:
        try:
            text, evidence = await memory.surface(recon, scorer.guides)
        finally:
            if recon.mode == "retrieve":
                await memory.used()
        recon = await fill_and_judge(scorer, replace(recon, evidence=evidence), text, window)
    await save_reconstruction(rt.store, recon, uses)


def check_options(modes, dims: str) -> None:
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise BadInput(f"unknown mode {unknown[0]!r}; choose from {', '.join(MODES)}", field="mode")
    if dims not in DIMS:
        raise BadInput(f"unknown dims {dims!r}; choose all or targeted", field="dims")


async def pass_variant(rt: Runtime, run_id: str) -> str:
    """The variant `score` and `attribute` write. An imported run's default variant holds the
    judgments of the release: scoring it again is a new pass beside them, named after the prompt
    directory in effect (e.g. `published-19bb836`, `bundled`), so `tables --compare` pairs the two."""
    run = await rt.store.runs.require(run_id)
    return prompt_pack(rt.settings.prompts_dir)["name"] if run.origin == "import" else DEFAULT_VARIANT


async def score_runs(rt: Runtime, runs, modes, *, ks=(5,), context_window: int | None = None, dims: str = "all",
                     variant: str | None = None, panel: Panel | None = None,
                     every_target: bool | None = None) -> list[str]:
    """Score every target of every ready user of every run in every mode (and every k of
    retrieve), all in parallel; returns one line per user skipped because it was not ready.
    `variant` None: each run's `pass_variant`. Every judge of the `panel` (None: the configured
    judge alone) grades every target (memaudit/scoring/panel.py); `every_target`: `Scorer.configured`."""
    check_options(modes, dims)
    scorer = Scorer.configured(rt.llm, panel, every_target=every_target)
    jobs, skipped = [], []
    for run_id in runs:
        run_variant = variant or await pass_variant(rt, run_id)
        run_jobs, run_skipped = await plan_scoring(rt, scorer, run_id, modes, ks, context_window=context_window,
                                                   dims=dims, variant=run_variant)
        jobs += run_jobs
        skipped += run_skipped
    await run_all(rt.store, jobs)
    return skipped
