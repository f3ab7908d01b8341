"""judge-check: control answers with a known right grade, no rollout needed.

For a seeded sample of bank entries (per category), every panel judge grades
    positives  the true value itself (passes at 1.0) and a paraphrase of it (passes at >= 0.75);
    negatives  another user's value for the same dimension (same category when the dimension is
               unique to this user), a vague on-topic non-answer, and the truth with its polarity
               reversed (a false pass at >= 0.5).
Paraphrase, non-answer and reversal are written once per entry by the `control_writer` role (a
generator call) and stored; every call goes through the cache, so replay re-executes the check.

`run_judge_check` is the library core (sharding or batching can wrap it); checks.py turns the
stored verdicts into pass rates with intervals and flags."""
from __future__ import annotations

import random
from functools import partial


from memaudit.errors import BadInput, InvalidOutput, failure_note
from memaudit.llm.batch import BatchPending
from memaudit.tables.judge_checks import KINDS, Thresholds
from memaudit.scoring.panel import Panel
from memaudit.prompts import Prompt, load_prompt
from memaudit.provenance import role_provenance
from memaudit.ask import ask
from memaudit.roles import CONTROL_WRITER, GENERATOR, RECOVERY_JUDGE, ROLE_SPECS
from memaudit.runtime import Runtime
from memaudit.scoring.jobs import run_all
from memaudit.types import CATEGORIES, CATEGORY_DEFINITIONS, BankEntry, Benchmark, User

ROLES_CALLED = (CONTROL_WRITER, RECOVERY_JUDGE)  # the roles judge-check calls
WRITTEN = {"paraphrase": "paraphrase", "non_answer": "non_answer", "reversed": "reversed"}  # kind -> writer field
PER_CATEGORY = 10


def sample_entries(bench: Benchmark, per_category: int, seed: int) -> list[tuple[User, BankEntry]]:
    """`per_category` entries of each category, drawn with the seed, in (user, dimension) order."""
    chosen = []
    for category in CATEGORIES:
        pool = [(u, e) for u in bench.users for e in u.bank if e.category == category]
        rng = random.Random(f"judge-check:{seed}:{bench.name}:{category}")
        chosen += rng.sample(pool, min(per_category, len(pool)))
    return sorted(chosen, key=lambda pair: (pair[0].id, pair[1].category, pair[1].dimension))


def other_value(bench: Benchmark, user: User, entry: BankEntry, seed: int) -> tuple[str, str] | None:
    """(another user's value, that user) for the same dimension, else for the same category."""
    rng = random.Random(f"judge-check:{seed}:{bench.name}:{user.id}:{entry.dimension}")
    others = [u for u in bench.users if u.id != user.id]
    for same in (lambda e: e.dimension == entry.dimension, lambda e: e.category == entry.category):
        found = [(e.short, u.id) for u in others for e in u.bank if same(e)]
        if found:
            return rng.choice(found)
    return None


async def write_controls(rt: Runtime, bench: Benchmark, user: User, entry: BankEntry, seed: int) -> dict[str, str]:
    """kind -> control text of one entry: stored ones are reused; missing ones are written and
    queued. A generator failure is stored with its error (those kinds are left out, counted)."""
    stored = await rt.store.judges.controls(bench.name)
    have = {kind: row for (u, d, kind), row in stored.items() if u == user.id and d == entry.dimension}
    rows = {"truth": (entry.short, None, None)}
    other = other_value(bench, user, entry, seed)
    if other is not None:
        rows["other_user"] = (other[0], other[1], None)
    if not all(kind in have and have[kind]["error"] is None for kind in WRITTEN):
        rows.update(await _written(rt, bench.name, entry, user.id))
    statements = [rt.store.judges.control_statement(bench.name, user.id, entry.dimension, kind, entry.category,
                                                    *values) for kind, values in rows.items()]
    rt.store.write_later(statements)
    texts = {kind: row["text"] for kind, row in have.items() if row["text"] is not None}
    texts.update({kind: text for kind, (text, _, _) in rows.items() if text is not None})
    return texts


async def _written(rt: Runtime, bench: str, entry: BankEntry, user_id: str) -> dict[str, tuple]:
    try:
        answer = await ask(rt.llm, CONTROL_WRITER, seed_parts=(bench, user_id, entry.dimension),
                           category=entry.category, definition=CATEGORY_DEFINITIONS[entry.category],
                           dimension=entry.dimension, explanation=entry.explanation, truth=entry.short)
    except InvalidOutput as exc:
        return {kind: (None, None, failure_note(exc)) for kind in WRITTEN}
    return {kind: (answer.data[field].strip(), None, None) for kind, field in WRITTEN.items()}


async def _check_entry(rt: Runtime, panel: Panel, prompt: Prompt, bench: Benchmark, user: User, entry: BankEntry,
                       seed: int) -> None:
    """Every panel judge grades the entry's control answers. Under --batch an entry whose verdicts
    wait for a batch stores none of them (as a scoring target writes no row), after every kind's
    calls were recorded, so they go out in one round."""
    texts = await write_controls(rt, bench, user, entry, seed)
    statements, waiting = [], []
    for kind in KINDS:
        if kind not in texts:
            continue
        try:
            verdicts = await panel.verdicts(prompt, (user.id, entry.dimension, "control", kind),
                                            dimension=entry.dimension, explanation=entry.explanation,
                                            ground_truth=entry.short, prediction=texts[kind])
        except BatchPending as pending:
            waiting.append(pending)
            continue
        statements += [rt.store.judges.control_verdict_statement(bench.name, user.id, entry.dimension, kind, v)
                       for v in verdicts]
    if waiting:
        raise waiting[0]
    rt.store.write_later(statements)
    await rt.store.maybe_flush()


def check_provenance(settings, panel: Panel) -> dict:
    """What the check's writer, (configured) judge and panel judges were sent, by role group and
    judge: replay rebuilds its model settings from it, as from a scoring pass's provenance."""
    writer, judge = ROLE_SPECS[CONTROL_WRITER], ROLE_SPECS[RECOVERY_JUDGE]
    judges = panel.provenance()
    return {"roles": {GENERATOR: role_provenance(settings, CONTROL_WRITER, writer.temperature, writer.max_tokens),
                      RECOVERY_JUDGE: role_provenance(settings, RECOVERY_JUDGE, judge.temperature,
                                                        judge.max_tokens)},
            **({"judges": judges} if judges else {})}


async def run_judge_check(rt: Runtime, benches: list[str], panel: Panel, *, per_category: int = PER_CATEGORY,
                          seed: int | None = None, thresholds: Thresholds = Thresholds(),
                          cells: set[tuple[str, str]] | None = None) -> None:
    """Write (or reuse) the control answers of a sample (drawn with `seed`, default the global
    seed) of each benchmark's entries and have every panel judge grade them; the pass is recorded
    so replay can re-execute it. `cells`: only these (benchmark, user) cells (replay: the ones the
    store checked, which for one shard's store are that shard's)."""
    if per_category < 1:
        raise BadInput("--per-category must be at least 1", field="per_category")
    seed = rt.settings.seed if seed is None else seed
    prompt = load_prompt(ROLE_SPECS[RECOVERY_JUDGE].prompt, rt.settings.prompts_dir)
    jobs = []
    for name in benches:
        bench = await rt.store.benchmarks.load(name)
        if bench is None:
            raise BadInput(f"no benchmark {name!r} in the store; import one with `memaudit bench import`",
                           field="bench")
        config = {**panel.describe(), "max_false_pass": thresholds.max_false_pass, "min_pass": thresholds.min_pass,
                  "provenance": check_provenance(rt.settings, panel)}
        await rt.store.write([rt.store.judges.check_statement(name, seed, per_category, config)])
        # --shard: a judge-check cell is (benchmark, user); the sample is drawn whole first, so every
        # shard of N agrees on it and the shards together check exactly the unsharded sample.
        jobs += [partial(_check_entry, rt, panel, prompt, bench, user, entry, seed)
                 for user, entry in sample_entries(bench, per_category, seed)
                 if rt.shard.holds(name, user.id) and (cells is None or (name, user.id) in cells)]
    await run_all(rt.store, jobs)
