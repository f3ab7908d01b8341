"""The Know/Act stage on the fake server with a scripted judge: counts partition the targets, a
judge with a position bias yields disagreements (never passes), the oracle chain gives each label,
and replay reproduces every case."""
from __future__ import annotations

import hashlib

import pytest

from memaudit.bench.act import ActScenario, save_act_scenarios
from memaudit.errors import BadInput
from memaudit.replay import replay_runs
from memaudit.report.view import write_report
from memaudit.scoring.recovery import score_runs
from memaudit.tables.paper import compute_tables
from memaudit.tables.utilization import load_cases
from memaudit.utilization.act import utilization_runs
from tests.scoring.recorded import record, runtime, script

EVIDENCE = "EVIDENCE-IN-REPLY"


def scenarios(bench) -> dict:
    return {u.id: tuple(ActScenario(u.id, e.category, e.dimension, f"{u.id} asks for help with situation {i}.")
                        for i, e in enumerate(u.bank)) for u in bench.users}


def final_message(body) -> str:
    return body["messages"][-1]["content"]


def agent(marks_evidence: bool, marks_short: bool):
    """Replies that differ with everything the assistant saw; marked when injected notes show (in
    the system prompt's memory section, or in the final message)."""
    def answer(body) -> str:
        last = body["messages"][0]["content"] + "\n" + final_message(body)
        if marks_evidence and EVIDENCE in last:
            return "USES-IT: an answer built on what the person said before."
        if marks_short and "stance " in last:
            return "USES-IT: an answer built on the noted stance."
        digest = hashlib.sha256(repr(body["messages"]).encode()).hexdigest()[:8]
        return f"A general answer {digest}."
    return answer


def answers_in(body) -> tuple[str, str]:
    text = final_message(body)
    first = text.split("First answer:\n", 1)[1].split("\n\nSecond answer:\n", 1)[0]
    second = text.split("Second answer:\n", 1)[1].split("\n\n", 1)[0]
    return first, second


def marker_judge(body) -> dict:
    """Picks the answer that uses the entry (carries the marker), in whichever position it is."""
    first, second = answers_in(body)
    shaped = "first" if "USES-IT" in first else "second" if "USES-IT" in second else "neither"
    return {"shaped": shaped, "reason": "scripted"}


async def measured(settings, fake, *, judge, marks_evidence=False, marks_short=False, known=True,
                   report=False):
    script(fake)
    fake.on("simulator", lambda body: {"feedback_type": "followup", "text": f"{EVIDENCE} about my situation"})
    fake.on("recovery_judge", lambda body: {"score": 1.0 if known else 0.25, "reason": "scripted"})
    fake.on_text(agent(marks_evidence, marks_short))
    fake.on("act_judge", judge)
    async with runtime(settings, fake) as rt:
        runs = await record(rt, ("longctx_full", "nomem"), users=2, tasks=3)
        bench = await rt.store.benchmarks.load("tiny")
        await save_act_scenarios(rt.store, "tiny", scenarios(bench))
        await score_runs(rt, runs, ["retrieve"], ks=(5,))
        measured = await utilization_runs(rt, runs, k=5)
        tables = await compute_tables(rt.store, runs, bootstrap=200)
        cases = await load_cases(rt.store, "longctx_full", 5)
        if report:
            await write_report(rt.store, settings.db.parent / "report")
    return measured, tables, cases


@pytest.mark.anyio
async def test_every_target_lands_in_one_count_and_replay_is_identical(settings, fake):
    runs, tables, cases = await measured(settings, fake, judge=marker_judge, marks_evidence=True, marks_short=True,
                                         report=True)
    assert runs == ["longctx_full"]  # nomem has no retrieve mode: nothing is known there
    (row,) = tables["utilization"]
    assert row["targets"] == 62 == len(cases) and row["failed"] == 0
    assert row["kp_ap"] + row["kp_af"] + row["kf_ap"] + row["kf_af"] == row["targets"]
    assert sum(block["targets"] for block in row["per_category"].values()) == row["targets"]
    # The plain answers carry no marker: nothing is used, every known entry goes to the oracle.
    assert row["kp_af"] == 62 and row["utilization"] == 0.0
    assert sum(row["oracle"].values()) == 62
    assert await replay_runs(settings) is None
    # The report drills down from the counts to every case: scenario, both answers, both verdicts.
    index = (settings.db.parent / "report" / "index.html").read_text()
    assert "Know/Act utilization" in index and "runs/longctx_full/utilization_k5.html#kp_af" in index
    page = (settings.db.parent / "report" / "runs" / "longctx_full" / "utilization_k5.html").read_text()
    case = cases[0]
    assert page.count("<details") == 62 and case["scenario"] in page
    assert case["answer"] in page and case["baseline"] in page
    assert "memory_first" in page and "baseline_first" in page


@pytest.mark.anyio
async def test_a_judge_preferring_the_first_answer_yields_disagreements_not_passes(settings, fake):
    _, tables, cases = await measured(settings, fake, judge=lambda body: {"shaped": "first", "reason": "first"})
    (row,) = tables["utilization"]
    assert row["order_disagreements"] == row["targets"] == 62
    assert row["kp_ap"] == row["kf_ap"] == 0 and row["act_accuracy"] == 0.0
    case = cases[0]
    assert case["act"] == "disagree"
    assert [v["picked"] for v in case["verdicts"]] == ["memory", "baseline"]


@pytest.mark.anyio
@pytest.mark.parametrize("marks_evidence, marks_short, expected", [
    (True, True, {"retrieval": 6, "comprehension": 56, "application": 0}),   # 3 targeted entries per user
    (False, True, {"retrieval": 0, "comprehension": 62, "application": 0}),
    (False, False, {"retrieval": 0, "comprehension": 0, "application": 62}),
])
async def test_the_oracle_chain_gives_each_label(settings, fake, marks_evidence, marks_short, expected):
    _, tables, cases = await measured(settings, fake, judge=marker_judge, marks_evidence=marks_evidence,
                                      marks_short=marks_short)
    (row,) = tables["utilization"]
    assert row["oracle"] == expected
    retrieval = [c for c in cases if c["oracle"] == "retrieval"]
    for c in retrieval:
        assert c["oracle_steps"][0]["injected"] and all(EVIDENCE in t for t in c["oracle_steps"][0]["injected"])


@pytest.mark.anyio
async def test_unknown_entries_skip_the_oracle(settings, fake):
    _, tables, cases = await measured(settings, fake, judge=marker_judge, known=False)
    (row,) = tables["utilization"]
    assert row["kf_af"] == 62 and row["utilization"] is None
    assert all(c["oracle"] is None and c["oracle_steps"] == [] for c in cases)
    async with runtime(settings, fake) as rt:  # another Know threshold would mix two definitions
        with pytest.raises(BadInput, match="threshold 0.75"):
            await utilization_runs(rt, ["longctx_full"], k=5, threshold=0.5)
