"""The published prompt pack (`memaudit prompts import-published`), built from a stand-in checkout
(tests/scoring/stand_in.py: the published layout and constant names, our own text): with it,
scoring and attribution of an imported published run send the stand-in's templates filled with
the same values, byte for byte, as a new scoring pass beside the imported judgments."""
from __future__ import annotations

import json
from dataclasses import replace

import orjson
import pytest

from memaudit.cli import main
from memaudit.release import import_release
from memaudit.scoring.attribution import attribute_runs
from memaudit.scoring.recovery import score_runs
from memaudit.tables.paper import compute_tables
from memaudit.tables.robustness import compare_variants
from memaudit.testing.release_fixture import write_release
from tests.scoring.recorded import requests_for, runtime, script
from tests.scoring.stand_in import constants, write_stand_in

RUN = "longctx_full_pooled_50"


def run_cli(args, capsys) -> tuple[int, str, str]:
    try:
        main(args)
        code = 0
    except SystemExit as exit_info:
        code = exit_info.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def pack(tmp_path, capsys):
    src = write_stand_in(tmp_path / "checkout")
    code, out, err = run_cli(["prompts", "import-published", str(src), "--out", str(tmp_path / "pack")], capsys)
    assert code == 0, err
    return tmp_path / "pack"


def test_the_pack_holds_the_templates_and_records_their_sources(pack, tmp_path, capsys):
    manifest = json.loads((pack / "pack.json").read_text())
    assert set(manifest["source_files"]) == {"scorer.py", "failure_attribution.py", "simulation.py",
                                             *(f"agents/{f}.py" for f in ("agent", "agent_mem0", "agent_memt",
                                                                          "agent_nomem", "agent_longctx")),
                                             *(f"A-mem-sys/agentic_memory/{f}.py"
                                               for f in ("memory_system", "llm_controller"))}
    assert manifest["published"]["slot_fill"] == "scorer.py _SLOT_FILL_PROMPT"
    assert manifest["published"]["pref_judge"] == "simulation.py _PREF_SYSTEM_PROMPT, PreferenceChecker.check"
    assert (pack / "task_gen.md").exists()  # every other role keeps memaudit's own prompt
    code, out, _ = run_cli(["--prompts", str(pack), "prompts", "list"], capsys)
    assert code == 0 and "published-unknown" in out
    line = next(line for line in out.splitlines() if line.startswith("slot_fill"))
    assert "_SLOT_FILL_PROMPT" in line
    line = next(line for line in out.splitlines() if line.startswith("agent_memt"))
    assert "agent (memt)" in line and "agents/agent_memt.py _REPLY_SYSTEM_PROMPT" in line
    assert "rollout_layout" in out
    code, out, _ = run_cli(["prompts", "list"], capsys)
    assert code == 0 and out.startswith("prompts: bundled")


@pytest.mark.parametrize("damage, named", [
    (lambda s: s.replace("_ORACLE_PROMPT =", "_ORACLE = "), "failure_attribution.py: no constant _ORACLE_PROMPT"),
    (lambda s: s.replace("Short: {gt_short}\nLong: {gt_explanation}\nTask:", "Long: {gt_explanation}\nTask:"),
     "_ORACLE_PROMPT lacks the placeholder {gt_short}"),
    (lambda s: s.replace("STAND-IN ORACLE.", "STAND-IN ORACLE {user_name}."),
     "_ORACLE_PROMPT has an unexpected placeholder {user_name}"),
])
def test_a_missing_constant_or_placeholder_is_one_line_and_nothing_is_written(tmp_path, capsys, damage, named):
    src = write_stand_in(tmp_path / "checkout")
    path = src / "failure_attribution.py"
    path.write_text(damage(path.read_text()))
    code, _, err = run_cli(["prompts", "import-published", str(src), "--out", str(tmp_path / "pack")], capsys)
    assert code == 2 and err.count("\n") == 1 and named.split(": ")[-1] in err and "failure_attribution.py" in err
    assert not (tmp_path / "pack").exists()


@pytest.mark.anyio
async def test_scoring_an_imported_run_with_the_pack_sends_the_templates_exactly(pack, tmp_path, settings, fake):
    root = write_release(tmp_path / "pub", users=1, runs=(RUN,), transcript_stores=True)
    src = constants(tmp_path / "checkout")
    guides = src["_CATEGORY_GUIDE"]
    script(fake)
    async with runtime(replace(settings, prompts_dir=pack), fake) as rt:
        await import_release(rt.store, root)
        await score_runs(rt, [RUN], ["dump_all", "retrieve"])
        await attribute_runs(rt, [RUN], ["dump_all"])
        imported = await rt.store.scores.load(RUN, "dump_all")
        rescored = await rt.store.scores.load(RUN, "dump_all", variant="published-unknown")
        retrieved = await rt.store.scores.load(RUN, "retrieve", variant="published-unknown")
        robustness = await compare_variants(rt.store, [RUN], "published-unknown")
        tables = await compute_tables(rt.store, [RUN], variant="published-unknown", bootstrap=0)
    assert len(imported) == len(rescored) == 31  # a new pass beside the imported judgments
    memories = orjson.loads((root / "memory" / RUN / "user_001" / "memories.json").read_bytes())["memories"]
    dump = json.dumps(memories, ensure_ascii=False, indent=2)
    entry = rescored[0]
    expected = src["_SLOT_FILL_PROMPT"].format(memories_json=dump, category=entry.category,
                                               category_guide=guides[entry.category], dimension=entry.dimension)
    fills = [r["messages"] for r in requests_for(fake, "slot_fill")]
    assert [{"role": "user", "content": expected}] in fills
    judged = [r["messages"] for r in requests_for(fake, "recovery_judge")]
    row = next(r for r in rescored if r.label.lower() != "unknown")
    assert [{"role": "user", "content": src["_SLOT_JUDGE_PROMPT"].format(
        dimension=row.dimension, explanation=row.explanation, ground_truth=row.ground_truth,
        predicted=row.label)}] in judged
    # longctx_full search results reach the reader with the published fields, in the published order
    shown = [json.loads(m[0]["content"].split("Notes as JSON:\n", 1)[1].split("\n\nKind:", 1)[0]) for m in fills]
    searched = [items for items in shown if items and len(items) <= 5 and "score" in items[0]]
    assert len(retrieved) == 31 and searched
    for items in searched:
        for item in items:
            assert list(item) == [f for f in ("content", "category", "task_index", "turn", "score") if f in item]
    assert robustness["targets"] == 31 * 2 and {r["run"] for r in robustness["runs"]} == {RUN}
    assert {p["prompts"] for p in tables["prompts"] if p["stage"] != "rollout"} == {"published-unknown"}
    # attribution: the stand-in's stage prompts, and the release's oracle verdicts reused without a call
    assert requests_for(fake, "oracle") == []
    # the release's oracle says its second task can invite its value (tests: release_fixture)
    episode = orjson.loads((root / "history" / RUN / "user_001" / "episode_2.json").read_bytes())
    transcript = "\n".join(line for t in episode["turns"] for line in
                           (f"Agent: {t['agent_response']}", f"User: {t['user_simulator']['text']}"))
    first = next(r for r in rescored if r.dimension == episode_dimension(root))
    disclosure = src["_DISCLOSURE_PROMPT"].format(dimension=first.dimension, gt_short=first.ground_truth,
                                                  gt_explanation=first.explanation, task_text=episode["task"],
                                                  transcript=transcript)
    sent = [r["messages"] for r in requests_for(fake, "disclosure")]
    assert first.score < 0.75 and [{"role": "user", "content": disclosure}] in sent


def episode_dimension(root) -> str:
    tasks = orjson.loads((root / "benchmark_data" / "CustomTasksPooledFinal" / "user_001.json").read_bytes())
    return tasks["tasks"][1]["target_dimension"]


@pytest.mark.anyio
async def test_mem0_dump_all_shows_the_published_store_exactly(pack, tmp_path, settings, fake):
    """Field order, nested objects and non-ASCII text as the published scorer serialised them."""
    root = write_release(tmp_path / "pub", users=1, runs=("mem0_pooled_50",))
    memories = [{"id": f"f{j}", "content": f"Café visit {j} — prefers ☕ black", "category": "fact",
                 "metadata": {"zeta": 1, "alpha": "ü", "score": 1e-05}, "timestamp": "2026-04-30T10:00:00"}
                for j in range(3)]
    path = root / "memory" / "mem0_pooled_50" / "user_001" / "memories.json"
    path.write_text(json.dumps({"num_memories": 3, "memories": memories}, ensure_ascii=False, indent=2))
    src = constants(tmp_path / "checkout")
    script(fake)
    async with runtime(replace(settings, prompts_dir=pack), fake) as rt:
        await import_release(rt.store, root)
        await score_runs(rt, ["mem0_pooled_50"], ["dump_all"])
        row = (await rt.store.scores.load("mem0_pooled_50", "dump_all", variant="published-unknown"))[0]
    expected = src["_SLOT_FILL_PROMPT"].format(
        memories_json=json.dumps(memories, ensure_ascii=False, indent=2), category=row.category,
        category_guide=src["_CATEGORY_GUIDE"][row.category], dimension=row.dimension)
    assert [{"role": "user", "content": expected}] in [r["messages"] for r in requests_for(fake, "slot_fill")]


def test_compare_shows_released_vs_rescored_b_with_a_paired_interval(tmp_path):
    """`tables --compare` rows: per run and mode, B of both variants and their paired difference."""
    from memaudit.tables.robustness import paired_runs
    sides = {0: {"u1": 0.5, "u2": 0.25, "u3": None}, 1: {"u1": 0.75, "u2": 0.25, "u3": 0.5}}
    (row,) = paired_runs("dump_all", 0, {"r": sides})
    assert row["users"] == 2 and row["B_baseline"] == 0.375 and row["B_variant"] == 0.5
    assert row["diff"] == 0.125 and row["diff_ci95"][0] <= 0.125 <= row["diff_ci95"][1]


@pytest.mark.anyio
async def test_replay_is_identical_for_runs_scored_with_and_without_the_pack(pack, settings, fake):
    """Each pass recorded its prompt directory: replay (here without --prompts) re-executes the
    pack-scored run with the pack and the other with memaudit's own prompts."""
    from memaudit.replay import replay_runs
    from tests.scoring.recorded import record

    script(fake)
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=2)
        await score_runs(rt, ["longctx_full"], ["dump_all"])
        await attribute_runs(rt, ["longctx_full"], ["dump_all"])
    async with runtime(replace(settings, prompts_dir=pack), fake) as rt:
        await record(rt, ("nomem",), users=1, tasks=2)
        await score_runs(rt, ["nomem"], ["dump_all"])
        await attribute_runs(rt, ["nomem"], ["dump_all"])
        tables = await compute_tables(rt.store, bootstrap=0)
    by_run = {(r["run"], r["stage"]): r["prompts"] for r in tables["prompts"]}
    assert by_run[("longctx_full", "score")] == "bundled" and by_run[("nomem", "score")] == "published-unknown"
    assert by_run[("longctx_full", "rollout")] == "bundled" and by_run[("nomem", "rollout")] == "published-unknown"
    judged = [b for b in requests_for(fake, "pref_judge") if "STAND-IN STYLE RATER" in b["messages"][0]["content"]]
    assert judged and all("per_pref" in b["response_format"]["json_schema"]["schema"]["properties"] for b in judged)
    assert by_run[("nomem", "attribute")] == "published-unknown"
    requests = len(fake.requests)
    assert await replay_runs(settings) is None
    assert len(fake.requests) == requests


@pytest.mark.anyio
async def test_with_the_pack_an_empty_memory_is_filled_and_judged_as_published(pack, settings, fake):
    """The published scorer asked the slot-filler and then the judge for every target, `[]` and an
    `unknown` label included (docs/fidelity.md S4): with the pack `nomem` gets both calls for each of
    its 31 targets, and replay re-executes them from the cache. A pass scored with the pack before
    this (its config without the field) replays with the shortcut it was made with."""
    from memaudit.replay import replay_runs
    from memaudit.scoring.recovery import EVERY_TARGET
    from tests.scoring.recorded import record

    script(fake).on("slot_fill", lambda body: {"label": "unknown", "reason": "The notes are empty."})
    async with runtime(replace(settings, prompts_dir=pack), fake) as rt:
        await record(rt, ("nomem", "longctx_full"), users=1, tasks=1)
        await score_runs(rt, ["nomem"], ["dump_all"])
        await score_runs(rt, ["longctx_full"], ["dump_all"], every_target=False)  # as scored before
        rows = await rt.store.scores.load("nomem", "dump_all")
        passes = {r: (await rt.store.scores.passes(r))[0].config.scorer for r in ("nomem", "longctx_full")}
    fills, judged = requests_for(fake, "slot_fill"), requests_for(fake, "recovery_judge")
    assert len(rows) == 31 and all(r.status == "ok" and r.label == "unknown" for r in rows)
    empty = [b for b in fills if "Notes as JSON:\n[]\n" in b["messages"][0]["content"]]
    assert len(fills) == 62 and len(empty) == 31  # nomem's dumps are `[]`, and are asked too
    assert len(judged) == 31  # longctx_full's unknowns, scored as before, were scored 0 without a call
    assert passes["nomem"][EVERY_TARGET] is True and EVERY_TARGET not in passes["longctx_full"]
    requests = len(fake.requests)
    assert await replay_runs(settings) is None
    assert len(fake.requests) == requests


@pytest.mark.anyio
async def test_retrieve_results_reach_the_reader_as_the_published_scorer_showed_them(pack, tmp_path, settings, fake):
    """With the pack, amem's results carry an empty category (A-Mem's search returns none) and memt's
    a null score (Mem-T's returns none), as the published prompt carried them."""
    runs = ("amem_pooled_50", "memt_memonly_pooled_50")
    root = write_release(tmp_path / "pub", users=1, runs=runs)
    native = {"amem_pooled_50": lambda j: {"keywords": ["k"], "context": "c", "tags": ["t"], "category": "user"},
              "memt_memonly_pooled_50": lambda j: {"category": "facts", "metadata": {}}}
    for run, fields in native.items():
        memories = [{"id": f"m{j}", "content": f"note {j} on every axis", **fields(j), "timestamp": "2026-04-30"}
                    for j in range(6)]
        path = root / "memory" / run / "user_001" / "memories.json"
        path.write_text(json.dumps({"num_memories": len(memories), "memories": memories}))
    script(fake)
    async with runtime(replace(settings, prompts_dir=pack), fake) as rt:
        await import_release(rt.store, root)
        await score_runs(rt, list(runs), ["retrieve"])
        shown = {run: [item for r in await rt.store.scores.load(run, "retrieve", variant="published-unknown")
                       for item in r.evidence["items"]] for run in runs}
    assert shown["amem_pooled_50"] and {item["category"] for item in shown["amem_pooled_50"]} == {""}
    memt = shown["memt_memonly_pooled_50"]
    assert memt and all("score" in item and item["score"] is None for item in memt)
