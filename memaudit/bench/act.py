"""Act scenarios: one realistic new request per user and bank entry, in the user's voice, where the
entry should shape a good answer although the request neither names nor paraphrases it. They are
benchmark inputs like tasks (the Know/Act utilization stage answers them) and live beside the
task files of the release layout:

    act_scenarios/user_XXX.json   {user_id, n_scenarios, scenarios: [{scenario, target_category,
                                   target_dimension, rationale, critic_verdicts?, pipeline_note?, …}]}

Fields other than the four named ones are kept as the scenario's review (critic verdicts, editor
revisions, how it was written). In the store: the `act_scenarios` table (db/006_utilization.sql).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from memaudit.bench.files import read_json, write_json
from memaudit.errors import BadInput
from memaudit.store import Statement, Store
from memaudit.store.utilization import Utilization
from memaudit.types import Benchmark

ACT_DIR = "act_scenarios"
FIELDS = ("scenario", "target_category", "target_dimension", "rationale")


@dataclass(frozen=True)
class ActScenario:
    user_id: str
    category: str
    dimension: str
    text: str
    rationale: str = ""
    review: dict = field(default_factory=dict)


def read_act_dir(root: str | Path, bench: Benchmark) -> dict[str, tuple[ActScenario, ...]] | None:
    """The scenarios under `<root>/act_scenarios/`, per user; None when the directory is absent.
    Every scenario must name a bank entry of its user, at most once; BadInput names the file."""
    base = Path(root) / ACT_DIR
    if not base.is_dir():
        return None
    users = {u.id: u for u in bench.users}
    out: dict[str, tuple[ActScenario, ...]] = {}
    for path in sorted(base.glob("*.json")):
        label = f"{ACT_DIR}/{path.name}"
        user = users.get(path.stem)
        if user is None:
            raise BadInput(f"{path.stem} is not a user of benchmark {bench.name!r}", file=label, user=path.stem)
        data = read_json(path, label, user.id)
        if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
            raise BadInput("missing list of scenarios", file=label, user=user.id, field="scenarios")
        bank = {e.dimension: e.category for e in user.bank}
        found: dict[str, ActScenario] = {}
        for i, raw in enumerate(data["scenarios"]):
            where = f"scenarios[{i}]"
            if not isinstance(raw, dict):
                raise BadInput("expected an object", file=label, user=user.id, field=where)
            text, dimension = raw.get("scenario"), raw.get("target_dimension")
            if not isinstance(text, str) or not text.strip():
                raise BadInput("missing text", file=label, user=user.id, field=f"{where}.scenario")
            if dimension not in bank:
                raise BadInput(f"{dimension!r} is not a bank entry of the user", file=label, user=user.id,
                               field=f"{where}.target_dimension")
            if raw.get("target_category") != bank[dimension]:
                raise BadInput(f"category {raw.get('target_category')!r}, the bank says {bank[dimension]!r}",
                               file=label, user=user.id, field=f"{where}.target_category")
            if dimension in found:
                raise BadInput(f"a second scenario for {dimension}", file=label, user=user.id, field=where)
            found[dimension] = ActScenario(user.id, bank[dimension], dimension, text.strip(),
                                           str(raw.get("rationale") or ""),
                                           {k: v for k, v in raw.items() if k not in FIELDS})
        out[user.id] = tuple(found.values())
    return out


def write_act_dir(root: str | Path, scenarios: dict[str, tuple[ActScenario, ...]]) -> None:
    for user_id, found in sorted(scenarios.items()):
        write_json(Path(root) / ACT_DIR / f"{user_id}.json", {
            "user_id": user_id, "n_scenarios": len(found),
            "scenarios": [{"scenario": s.text, "target_category": s.category, "target_dimension": s.dimension,
                           "rationale": s.rationale, **s.review} for s in found]})


def act_statements(bench: str, scenarios: dict[str, tuple[ActScenario, ...]]) -> list[Statement]:
    return [Utilization.scenario_statement(bench, s.user_id, s.dimension, s.category, s.text, s.rationale, s.review)
            for found in scenarios.values() for s in found]


async def save_act_scenarios(store: Store, bench: str, scenarios: dict[str, tuple[ActScenario, ...]] | None) -> None:
    if scenarios:
        await store.write(act_statements(bench, scenarios))


async def load_act_scenarios(store: Store, bench: str) -> dict[str, dict[str, ActScenario]]:
    """user -> dimension -> scenario, for the benchmark's stored scenarios."""
    out: dict[str, dict[str, ActScenario]] = {}
    for r in await store.utilization.scenario_rows(bench):
        out.setdefault(r["user_id"], {})[r["dimension"]] = ActScenario(
            r["user_id"], r["category"], r["dimension"], r["text"], r["rationale"], r["review"])
    return out
