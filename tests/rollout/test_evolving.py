"""Evolving banks end to end on the bundled sample and a scripted fake: the simulator plays the value
of the current task, each change is disclosed once in its episode and recorded on that turn, export
and teacher forcing keep the events, and scoring splits stale memory into store and recovery.

Two scripted memory systems: `keep_all` keeps every user message; `newest_only` keeps one fact per
dimension and replaces it when the user states a new value. The scripted user states the target of
each task as `dimension = value`, and on a disclosure turn the changed entry's new value."""
from __future__ import annotations

import re

import orjson
import pytest

from memaudit.adapters import registry
from memaudit.adapters.base import Event, MemoryAdapter
from memaudit.bench.history import changes, value_at
from memaudit.bench.instances import resolve_bench
from memaudit.release.exporter import export_runs
from memaudit.release.importer import import_release
from memaudit.replay import replay_runs
from memaudit.report import userdata
from memaudit.report.html import esc
from memaudit.report.view import write_report
from memaudit.rollout.runner import run_rollout
from memaudit.scoring.evolving import score_evolving
from memaudit.scoring.recovery import score_runs
from memaudit.store import open_store
from memaudit.tables.evolving import fama
from memaudit.tables.paper import compute_tables
from memaudit.tables.paper_render import render, title
from memaudit.types import EvolvingJudgment, MemoryItem

pytestmark = pytest.mark.anyio
FACT = re.compile(r"^(\w+) = (.+)$", re.M)
PREFIX = 70


class KeepAll(MemoryAdapter):
    name = "keep_all"

    def __init__(self, ctx):
        super().__init__(ctx)
        self.items: list[dict] = []

    async def observe(self, event: Event) -> None:
        if event.kind == "user":  # one item per line the user said
            self.items += [{"id": self.new_id(line), "content": line} for line in event.text.splitlines()]

    async def search(self, query: str, k: int) -> list[MemoryItem]:
        hits = [i for i in self.items if FACT.match(i["content"])
                and FACT.match(i["content"]).group(1).replace("_", " ") in query]
        return [MemoryItem(i["id"], i["content"], 1.0) for i in hits[:k]]

    def dump(self) -> list[dict]:
        return [dict(i) for i in self.items]

    def snapshot(self) -> dict:
        return {**self.state_header(), "items": self.dump()}

    async def restore(self, state: dict) -> None:
        self.load_header(state)
        self.items = [dict(i) for i in state["items"]]


class NewestOnly(KeepAll):
    name = "newest_only"

    async def observe(self, event: Event) -> None:
        for dim, value in FACT.findall(event.text) if event.kind == "user" else ():
            # one fact per dimension: a new value replaces the old one
            self.items = [i for i in self.items if not i["content"].startswith(dim + " = ")]
            self.items.append({"id": dim, "content": f"{dim} = {value}"})


@pytest.fixture
def scripted_systems(monkeypatch):
    scripted = (registry.Registration("keep_all", f"{__name__}:KeepAll", "test"),
                registry.Registration("newest_only", f"{__name__}:NewestOnly", "test"))
    found = registry.registrations() + scripted
    monkeypatch.setattr(registry, "registrations", lambda: found)


def script(fake, bench):
    tasks = {t.text: (u, t) for u in bench.users for t in bench.tasks[u.id]}
    news = {e.history[c.version].short: c.dimension for u in bench.users for c in changes(u)
            for e in u.bank if e.dimension == c.dimension}

    def simulator(body):
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        owner, task = next(v for text, v in tasks.items() if text in user)
        for e in owner.bank:  # the profile shown is the one valid at this task
            shown = value_at(e, task.index)
            assert shown is None or orjson.dumps(shown.short).decode() in system
            assert all(orjson.dumps(v.short).decode() not in system for v in e.history
                       if v.valid_from_task > task.index)
        target = next(e for e in owner.bank if e.dimension == task.target_dimension)
        said = f"{target.dimension} = {value_at(target, task.index).short}"
        disclosed = re.search(r"\nNow: (.+)\n", user)
        if disclosed:  # the change in passing, then the task's own target
            said = f"{news[disclosed.group(1)]} = {disclosed.group(1)}\n{said}"
        return {"feedback_type": "satisfied", "text": said}

    def slot_fill(body):  # every value the memory holds for the slot, oldest first
        text = body["messages"][-1]["content"]
        dim = re.search(r"slot name: (\w+)", text).group(1)
        memory = orjson.loads(text.split("Saved memory of the assistant:\n", 1)[1].split("\n\nSlot to fill", 1)[0])
        values = [m.group(2) for m in (FACT.match(i["content"]) for i in memory) if m and m.group(1) == dim]
        # each value cut to PREFIX characters: two of them fit in the reader's 150-character label
        return {"label": " / ".join(dict.fromkeys(v[:PREFIX] for v in values)) or "unknown", "reason": "memory"}

    def recovery_judge(body):
        text = body["messages"][-1]["content"]
        truth = re.search(r"True value: (.+)", text).group(1)
        predicted = re.search(r"Predicted value: (.+)", text).group(1)
        return {"score": 1.0 if truth[:PREFIX] in predicted else 0.0, "reason": "r"}

    def asserts(body):
        text = body["messages"][-1]["content"]
        value = re.search(r"Value to look for: (.+)", text).group(1)
        return {"asserts": value[:PREFIX] in re.search(r"Predicted value: (.+)", text).group(1), "reason": "compared"}

    def store(body):
        text = body["messages"][-1]["content"]
        stale = re.search(r"Old value \(no longer true\): (.+)", text).group(1)
        memory = orjson.loads(text.split("Memory:\n", 1)[1].split("\n\nDoes the memory", 1)[0])
        return {"holds": any(stale in item["content"] for item in memory), "reason": "looked"}

    return (fake.on("simulator", simulator).on("slot_fill", slot_fill).on("recovery_judge", recovery_judge)
            .on("recovery_judge_asserts", asserts).on("recovery_judge_store", store))


async def test_changes_are_disclosed_once_recorded_exported_and_scored(scripted_systems, open_rt, fake, tmp_path,
                                                                       settings):
    async with open_rt() as rt:
        bench = await resolve_bench(rt.store, "sample")
        script(fake, bench)
        runs = await run_rollout(rt, bench, ["keep_all", "newest_only"], max_turns=1, progress=False)
        expected = sorted((u.id, c.valid_from_task, c.dimension, c.version) for u in bench.users for c in changes(u))
        assert len(expected) == 18
        for run in runs:  # each change in exactly one episode: the first at or after valid_from_task
            found = sorted((r["user_id"], r["task_idx"], r["dimension"], r["version"])
                           for r in await rt.store.episodes.change_rows(run))
            assert found == expected
        tasks = {t.text: (u.id, t.index) for u in bench.users for t in bench.tasks[u.id]}
        noted = set()  # (user, task) of every simulator call told about a change: only its episode's
        for r in fake.requests:
            text = r["messages"][-1]["content"]
            if "Until now:" in text:
                noted.add(next(v for task, v in tasks.items() if task in text))
        assert noted == {(user, task) for user, task, _, _ in expected}
        agent_calls = [r for r in fake.requests if r.get("response_format") is None]
        assert agent_calls and not any("Until now:" in orjson.dumps(r["messages"]).decode() for r in agent_calls)

        (forced,) = await run_rollout(rt, bench, ["newest_only"], transcripts="keep_all", progress=False)
        assert await rt.store.episodes.change_rows(forced) == await rt.store.episodes.change_rows("keep_all")

        await export_runs(rt.store, ["keep_all"], tmp_path / "out")
        user, task, dim, version = expected[0]
        episode = orjson.loads((tmp_path / "out" / f"history/keep_all/{user}/episode_{task}.json").read_bytes())
        assert episode["turns"][0]["change"] == {"dimension": dim, "version": version}
        async with open_store(tmp_path / "imported.db") as other:  # the export reads back with its events
            (imported,) = await import_release(other, tmp_path / "out", name="evo")
            assert await other.episodes.change_rows(imported) == await rt.store.episodes.change_rows("keep_all")
            assert sum(bool(e.history) for u in (await other.benchmarks.load("evo")).users for e in u.bank) == 18

        await score_runs(rt, runs, ["dump_all", "retrieve"], ks=(5,))
        await score_evolving(rt, runs, ["dump_all", "retrieve"], ks=(5,))
        tables = await compute_tables(rt.store, runs, bootstrap=200)
        index = (await write_report(rt.store, tmp_path / "report", runs)).read_text()
    assert esc(title("evolving")) in index
    data = userdata.decode((tmp_path / "report" / userdata.data_file("sample", user)).read_bytes())
    section = data["sections"]["target"][dim]  # the target view shows it (report/assets/user.js)
    assert "History of this entry" in section and "<svg" in section and f"episode {task}, turn 1" in section
    rows = {(r["run"], r["mode"]): r for r in tables["evolving"]}
    assert rows[("keep_all", "dump_all")]["stale_in_store"] == 1.0
    assert rows[("newest_only", "dump_all")]["stale_in_store"] == 0.0
    assert rows[("keep_all", "dump_all")]["stale_in_recovery"] == 1.0  # it reads back old and new
    assert rows[("newest_only", "dump_all")]["FAMA"] == 1.0 and rows[("keep_all", "dump_all")]["FAMA"] == 0.5
    assert {r["user"] for r in tables["evolving_targets"]} == {"user_001", "user_002", "user_003"}
    for r in tables["evolving_targets"]:
        assert set(r) == {"run", "partial", "mode", "user", "dimension", "present", "absent", "FAMA"}
        assert r["FAMA"] == fama(r["present"], r["absent"])["FAMA"]
    assert "Evolving targets" in render(tables, "md") and "FAMA" in render(tables, "latex")
    assert await replay_runs(settings) is None


async def test_a_static_benchmark_gets_no_change_no_note_and_no_evolving_table(open_rt, fake, bench):
    async with open_rt() as rt:
        await rt.store.benchmarks.save(bench)
        (run,) = await run_rollout(rt, bench, ["longctx_full"], max_turns=2, progress=False)
        await score_runs(rt, [run], ["dump_all"])
        await score_evolving(rt, [run], ["dump_all"])
        assert await rt.store.episodes.change_rows(run) == []
        assert await rt.store.evolving.load([run], "default") == []
        assert "simulator_change" not in (await rt.store.runs.get(run)).prompt_hashes
        tables = await compute_tables(rt.store, [run], bootstrap=0)
    assert "evolving" not in tables and "evolving_targets" not in tables
    assert not any("Until now:" in orjson.dumps(r["messages"]).decode() for r in fake.requests)



async def test_a_partial_run_targets_the_versions_valid_at_its_last_task(scripted_systems, open_rt, fake, tmp_path):
    """user_002 played to task 15: only food_preparation_skill (changed at task 14) is an evolving
    target; investing_… (changed at 16) is a static target whose truth is its first version, and no
    later change is judged or counted as stale: a row or judgment made against a later version
    (before issue 33) is made again or dropped."""
    static = "investing_and_retirement_accounts_knowledge"
    async with open_rt() as rt:
        bench = await resolve_bench(rt.store, "sample")
        script(fake, bench)
        (run,) = await run_rollout(rt, bench, ["keep_all"], users=["user_002"], tasks=15, max_turns=1,
                                   progress=False)
        await score_runs(rt, [run], ["dump_all"])
        # a row judged against the bank's last version (as before issue 33) is scored again
        last = next(e for u in bench.users if u.id == "user_002" for e in u.bank if e.dimension == static).short
        await rt.store.write([("UPDATE reconstructions SET ground_truth=? WHERE run=? AND dimension=?",
                               (last, run, static))])
        await score_runs(rt, [run], ["dump_all"])
        old = EvolvingJudgment(run, "dump_all", 0, "default", "user_002", "knowledge_memory", static,
                               "stale_absent", 0, True, "judged against the last version", "ok", snapshot_task=15)
        await rt.store.write([rt.store.evolving.statement(old)])
        await score_evolving(rt, [run], ["dump_all"])
        judgments = await rt.store.evolving.load([run], "default")
        recons = {r.dimension: r for r in await rt.store.scores.load(run)}
        tables = await compute_tables(rt.store, [run], bootstrap=0)
        await write_report(rt.store, tmp_path / "report", [run])
    data = userdata.decode((tmp_path / "report" / userdata.data_file("sample", "user_002")).read_bytes())
    user = next(u for u in bench.users if u.id == "user_002")
    entries = {e.dimension: e for e in user.bank}
    assert {j.dimension for j in judgments} == {"food_preparation_skill"}
    assert sorted((j.mode, j.criterion, j.version) for j in judgments) == [
        ("dump_all", "current_present", 1), ("dump_all", "stale_absent", 0), ("store", "stale_in_store", 0)]
    assert {r["dimension"] for r in tables["evolving_targets"]} == {"food_preparation_skill"}
    for dim in ("investing_and_retirement_accounts_knowledge", "self_view_flexibility", "response_format"):
        assert recons[dim].ground_truth == entries[dim].history[0].short != entries[dim].short
    assert recons["food_preparation_skill"].ground_truth == entries["food_preparation_skill"].history[1].short
    # the report names the run's truth beside the bank's current value, and which version it is
    assert data["recons"][static][0]["truth"] == entries[static].history[0].short
    assert "truth" not in data["recons"]["food_preparation_skill"][0]
    assert "the truth is version 0, a static target" in data["sections"]["target"][static]
    assert "the truth is version 1, an evolving target" in data["sections"]["target"]["food_preparation_skill"]
