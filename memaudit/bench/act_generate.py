"""`memaudit generate-act`: Act scenarios (memaudit/bench/act.py) for a benchmark's users, through
the generator role.

Per bank entry: the `act_scenario` prompt writes a new request (given the persona, the entry and the
entry's earlier task, so the situation differs), the same code checks as task generation reject
one that quotes the dimension or the short or probes the person, and the review of task
generation (memaudit/bench/generate.py: the blind anti-fishing critic, then an editor rewrite
while it says fishing; up to 3 rewrites, each reviewed again: `REVIEW`) checks it. Scenarios land
in the store as they are finished (resume skips entries that have one); `--out DIR` also writes
them in the release layout.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from memaudit.ask import ask
from memaudit.bench.act import ActScenario, load_act_scenarios, save_act_scenarios, write_act_dir
from memaudit.bench.generate import TASK_SCHEMA, GenerationOptions, UserGenerator, task_check, _json
from memaudit.bench.pool import load_pool
from memaudit.errors import EndpointError, MemauditError
from memaudit.roles import ACT_SCENARIO
from memaudit.types import CATEGORY_DEFINITIONS, BankEntry, Benchmark, User

RECORD_FIELDS = ("task", "rationale", "target_category", "target_dimension", "target_short")

# Act scenarios are not in the published runner: they keep memaudit's own review (every rewrite
# reviewed again, up to 3), not the published task generator's single pass.
REVIEW = GenerationOptions(edits=3, recheck=True)


@dataclass
class ActReport:
    written: int = 0
    kept: int = 0                                   # entries that already had a scenario
    still_fishing: int = 0
    failures: dict[str, str] = field(default_factory=dict)   # "user/dimension" -> error


async def write_scenario(rt, pool: dict, user: User, entry: BankEntry, earlier_task: str,
                         generator: UserGenerator) -> ActScenario:
    axes = {p.name: p.axis for entries in pool.values() for p in entries}
    target = dict(persona=_json(user.persona), category=entry.category,
                  definition=CATEGORY_DEFINITIONS[entry.category], dimension=entry.dimension,
                  axis=axes.get(entry.dimension, ""), short=entry.short)
    draft = await ask(rt.llm, ACT_SCENARIO, schema=TASK_SCHEMA, check=task_check(entry),
                      seed_parts=(user.id, "act", entry.dimension), explanation=entry.explanation,
                      task=earlier_task, **target)
    record = await generator.review(f"act:{entry.dimension}", entry, draft.data, target)
    review = {k: v for k, v in record.items() if k not in RECORD_FIELDS}
    return ActScenario(user.id, entry.category, entry.dimension, record["task"], record["rationale"], review)


async def generate_act(rt, bench: Benchmark, *, users: list[User] | None = None, out_dir=None) -> ActReport:
    pool = bench.pool or load_pool(None)
    report = ActReport()
    existing = await load_act_scenarios(rt.store, bench.name)
    chosen = list(users if users is not None else bench.users)

    async def one(index: int, user: User) -> None:
        generator = UserGenerator(rt, pool, user.id, index, REVIEW)
        tasks = {t.target_dimension: t.text for t in bench.tasks.get(user.id, ())}
        for entry in user.bank:
            if entry.dimension in existing.get(user.id, {}):
                report.kept += 1
                continue
            try:
                scenario = await write_scenario(rt, pool, user, entry, tasks.get(entry.dimension, "(none)"), generator)
            except EndpointError:
                raise  # misconfigured or unreachable: ends the command
            except MemauditError as exc:
                report.failures[f"{user.id}/{entry.dimension}"] = str(exc)
                continue
            await save_act_scenarios(rt.store, bench.name, {user.id: (scenario,)})
            report.written += 1
        report.still_fishing += generator.still_fishing

    async with anyio.create_task_group() as tg:
        for index, user in enumerate(chosen):
            tg.start_soon(one, index, user)
    if out_dir is not None:
        stored = await load_act_scenarios(rt.store, bench.name)
        write_act_dir(out_dir, {u.id: tuple(stored[u.id][e.dimension] for e in u.bank if e.dimension in stored[u.id])
                                for u in bench.users if u.id in stored})
    return report
