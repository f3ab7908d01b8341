"""The demo (what `make run` runs) end to end on the fake server: every stage, partial tables,
the report, and a replay that is identical with no model at all."""
from __future__ import annotations

import pytest

from memaudit.cli.demo_cmds import print_tables
from memaudit.demo import DEMO_SYSTEMS, DemoSize, run_demo
from memaudit.replay import replay_runs
from tests.scoring.recorded import runtime, script


@pytest.mark.anyio
async def test_demo_runs_every_stage_and_replays_identically(settings, fake, tmp_path, capsys):
    script(fake)
    async with runtime(settings, fake) as rt:
        result = await run_demo(rt, DemoSize(users=2, tasks=1, max_turns=2), tmp_path / "report")
    tables = result["tables"]
    assert sorted(r["run"] for r in tables["table2"]) == sorted(f"{s}_demo" for s in DEMO_SYSTEMS)
    assert all(r["partial"] for r in tables["table2"])
    assert all(r["users"] == 2 for r in tables["table2"])
    by_run = {r["run"]: r for r in tables["table2"]}
    assert by_run["nomem_demo"]["B_retrieve"] is None and by_run["longctx_full_demo"]["B_retrieve"] is not None
    labels = ("ok", "memory_failure", "task_design_failure", "agent_elicitation_failure", "simulator_too_strict",
              "no_targeted_task", "unclassified", "overflow")
    for row in tables["table4"]:
        if row["ok"] is not None:  # a scored mode: every targeted entry of both users got one label
            assert sum(row[label] for label in labels) == 2, row
    assert (tmp_path / "report" / "index.html").exists()
    print_tables(tables)
    printed = capsys.readouterr().out
    assert "Table 2" in printed and "(partial)" in printed and "Table 4" in printed

    requests = len(fake.requests)
    assert await replay_runs(settings) is None
    assert len(fake.requests) == requests  # replay contacted no model


def test_the_cut_line_lists_the_embedded_caps_only_when_the_embedded_model_served():
    from memaudit.config import EMBEDDED_SIMULATOR_TEXT_CHARS
    from memaudit.roles import embedded_max_tokens
    size = DemoSize()
    embedded = size.cuts(3, 31, embedded=True)
    assert f"agent {embedded_max_tokens()['agent']}" in embedded and f"{EMBEDDED_SIMULATOR_TEXT_CHARS} characters" in embedded
    assert "max tokens" not in size.cuts(3, 31, embedded=False)
