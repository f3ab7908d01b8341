"""Tables from a small hand-built store: every definition checked by hand, the JSON contract,
the renderers, the command and the robustness comparison."""
from __future__ import annotations

import statistics

import anyio
import orjson
import pytest

from memaudit.cli import main
from memaudit.store import Store, dumps
from memaudit.store.scores import Scores
from memaudit.tables.paper import compute_tables
from memaudit.tables.paper_render import render
from memaudit.tables.robustness import compare_variants
from memaudit.testing.synthetic_scores import (attribution_row, bench_rows, call_rows, call_use_row, dimensions,
                                               episode_row, insert, recon_row, run_row, snapshot_row, turn_row)
from memaudit.types import ATTRIBUTION_LABELS, CATEGORIES

USERS = ("u1", "u2", "u3")
CLI_TABLE2_KEYS = {"run", "system", "users", "A", "D", "C", "B_dump_all", "B_dump_all_std", "B_retrieve",
                   "B_retrieve_std", "items", "chars", "overflow_dump_all", "overflow_retrieve"}
# u3's dump_all: every target 0.25 except one skill target that overflowed (scored 0)
B3 = (6 * 0.25 / 7 + 4 * 0.25) / 5


def scored(run, mode, per_user: dict, k=None, variant="default", overflow=(), failed=()):
    return [recon_row(run, mode, u, c, d, None if (u, d) in overflow + failed else score,
                      "overflow" if (u, d) in overflow else "failed" if (u, d) in failed else "ok",
                      k=k, variant=variant, snapshot_task=1)
            for u, score in per_user.items() for c, d in dimensions()]


def rows():
    r = bench_rows("b", list(USERS))
    r["runs"] = [run_row("amem_x", "amem", config={"tasks": None}),
                 run_row("mem0_imp", "mem0", origin="import"),
                 run_row("nomem_p", "nomem", config={"tasks": 12})]
    r["episodes"], r["turns"], r["snapshots"] = [], [], []
    for run in ("amem_x", "mem0_imp", "nomem_p"):
        for i, u in enumerate(USERS):
            r["episodes"].append(episode_row(run, u, 1, "max_turns" if u == "u3" else "satisfied", 2))
            r["turns"] += [turn_row(run, u, 1, 1, 4.0 + i * 0.5), turn_row(run, u, 1, 2, None)]
            r["snapshots"].append(snapshot_row(run, u, 1, 10 * (i + 1), 100.0 * (i + 1)))
    r["reconstructions"] = (
        scored("amem_x", "dump_all", {"u1": 1.0, "u2": 0.5, "u3": 0.25}, overflow=(("u3", "skill_memory_0"),))
        + scored("amem_x", "retrieve", {"u1": 0.75, "u2": 0.5, "u3": 0.25}, failed=(("u1", "self_model_0"),))
        + scored("amem_x", "retrieve", {"u1": 0.0, "u2": 0.0, "u3": 0.0}, k=1)
        + scored("mem0_imp", "dump_all", {"u1": 0.75, "u2": 0.5, "u3": 0.25})
        + scored("nomem_p", "dump_all", {"u1": 0.0, "u2": 0.0, "u3": 0.0}))
    labels = ["ok"] * 5 + ["memory_failure"] * 3 + ["task_design_failure", "overflow"]
    r["attributions"] = [attribution_row("amem_x", "dump_all", "u1", c, d, label)
                         for (c, d), label in zip(dimensions(), labels)]
    r["calls"] = [call_rows("k1", "agent", 1000, 100, 200)]
    r["call_uses"] = [call_use_row("amem_x", "episode:u1:1", "k1", "agent")]
    return r


def with_store(tmp_path, fn, extra=None):
    async def go():
        store = await Store.open(tmp_path / "t.db")
        try:
            await insert(store, rows())
            if extra:
                await store.write(extra)
            return await fn(store)
        finally:
            await store.close()
    return anyio.run(go)


def tables_of(tmp_path, extra=None, **kwargs):
    return with_store(tmp_path, lambda s: compute_tables(s, bootstrap=kwargs.pop("bootstrap", 2000), **kwargs), extra)


def by_run(rows, **match):
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def test_table2_by_hand(tmp_path):
    t = tables_of(tmp_path)
    amem, mem0, nomem = t["table2"]
    assert [r["run"] for r in t["table2"]] == ["amem_x", "mem0_imp", "nomem_p"]
    assert CLI_TABLE2_KEYS <= set(amem)
    assert amem["users"] == 3 and amem["system"] == "amem"
    assert amem["A"] == pytest.approx(200 / 3)  # a percentage
    assert amem["D"] == pytest.approx(4.5) and amem["D_std"] == pytest.approx(0.5)
    assert amem["C"] == 2 and amem["C_satisfied"] == 2
    assert amem["B_dump_all"] == pytest.approx((1.0 + 0.5 + B3) / 3)
    assert amem["B_dump_all_std"] == pytest.approx(statistics.stdev([1.0, 0.5, B3]))
    assert amem["B_retrieve"] == pytest.approx(0.5) and amem["B_retrieve_std"] == pytest.approx(0.25)
    assert amem["retrieve_k"] == 5  # the k = 1 sweep goes to table3 only
    assert (amem["overflow_dump_all"], amem["overflow_retrieve"]) == (1, 0)
    assert (amem["failed_dump_all"], amem["failed_retrieve"]) == (0, 1)
    assert (amem["items"], amem["chars"]) == (20, 200)
    assert amem["tokens"] == 1100
    assert amem["B_dump_all_per_Mtok"] == pytest.approx(amem["B_dump_all"] / 0.0011)
    low, high = amem["B_dump_all_ci95"]
    assert low <= amem["B_dump_all"] <= high
    assert amem["partial"] is False

    # imported without call records: tokens n/a; a mode never scored: null
    assert mem0["tokens"] is None and mem0["B_dump_all_per_Mtok"] is None
    for key in ("B_retrieve", "B_retrieve_std", "B_retrieve_ci95", "overflow_retrieve", "failed_retrieve"):
        assert mem0[key] is None
    assert mem0["B_dump_all"] == pytest.approx(0.5)
    assert nomem["partial"] is True  # 12 tasks of 31


def test_partial_from_a_targeted_scoring_pass(tmp_path):
    extra = [("INSERT INTO score_passes VALUES (?,?,?,?,?)", ("mem0_imp", "dump_all", 0, "default",
                                                              dumps({"dims": "targeted"})))]
    t = tables_of(tmp_path, extra)
    assert [r["partial"] for r in t["table2"]] == [False, True, True]


def test_table3_category_means_and_k_sweep(tmp_path):
    t = tables_of(tmp_path)
    dump = by_run(t["table3"], run="amem_x", mode="dump_all")[0]
    assert {"run", "system", "mode", "overall", *CATEGORIES, *(f"{c}_std" for c in CATEGORIES),
            *(f"{c}_ci95" for c in CATEGORIES)} <= set(dump)
    assert dump["k"] is None and dump["users"] == 3
    assert dump["skill_memory"] == pytest.approx((1.0 + 0.5 + 1.5 / 7) / 3)
    assert dump["self_model"] == pytest.approx((1.0 + 0.5 + 0.25) / 3)
    assert dump["self_model_std"] == pytest.approx(statistics.stdev([1.0, 0.5, 0.25]))
    assert dump["overall"] == pytest.approx((1.0 + 0.5 + B3) / 3)
    assert [r["k"] for r in by_run(t["table3"], run="amem_x", mode="retrieve")] == [1, 5]
    unscored = by_run(t["table3"], run="mem0_imp", mode="retrieve")[0]
    assert all(unscored[c] is None for c in (*CATEGORIES, "overall"))


def test_table4_counts_and_recovery_rate(tmp_path):
    t = tables_of(tmp_path)
    row = by_run(t["table4"], run="amem_x", mode="dump_all")[0]
    assert {"run", "system", "mode", "recovery_rate", *ATTRIBUTION_LABELS} <= set(row)
    assert {label: row[label] for label in ATTRIBUTION_LABELS} == {
        "ok": 5, "memory_failure": 3, "task_design_failure": 1, "agent_elicitation_failure": 0,
        "simulator_too_strict": 0, "no_targeted_task": 0, "unclassified": 0, "overflow": 1}
    assert row["recovery_rate"] == pytest.approx(5 / 8)
    assert by_run(t["table4"], run="amem_x", mode="retrieve")[0]["ok"] is None


def test_footprint_gap_tokens(tmp_path):
    t = tables_of(tmp_path)
    foot = by_run(t["footprint"], run="amem_x")[0]
    assert (foot["items_p50"], foot["items_p90"], foot["chars_p50"], foot["chars_p90"]) == (20, 30, 200, 300)
    gap = by_run(t["gap"], run="amem_x")[0]
    gaps = [0.25, 0.0, B3 - 0.25]
    assert gap["per_user"] == pytest.approx(dict(zip(USERS, gaps)))
    assert gap["mean"] == pytest.approx(sum(gaps) / 3)
    assert gap["median"] == pytest.approx(0.0)  # lower middle of three
    assert (gap["min"], gap["max"]) == (pytest.approx(B3 - 0.25), 0.25)
    assert by_run(t["gap"], run="mem0_imp")[0]["mean"] is None
    assert by_run(t["tokens"], run="amem_x", role="all")[0]["total_tokens"] == 1100
    assert by_run(t["tokens"], run="mem0_imp")[0]["total_tokens"] is None


def test_comparisons_pairs_within_run_and_holm(tmp_path):
    t = tables_of(tmp_path)
    dump = [c for c in t["comparisons"] if c["mode"] == "dump_all"]
    assert [(c["a"], c["b"]) for c in dump] == [("amem_x", "mem0_imp"), ("amem_x", "nomem_p"), ("mem0_imp", "nomem_p")]
    first = dump[0]
    assert first["users"] == 3
    assert first["diff"] == pytest.approx((0.25 + 0.0 + (B3 - 0.25)) / 3)
    assert set(first) >= {"mode", "a", "b", "diff", "ci95", "p", "p_holm"}
    # exact enumeration over 2^3 sign patterns; Holm over the three pairs of this mode
    ps = sorted(c["p"] for c in dump)
    assert sorted(c["p_holm"] for c in dump) == pytest.approx(
        [min(1, 3 * ps[0]), min(1, max(3 * ps[0], 2 * ps[1])), min(1, max(3 * ps[0], 2 * ps[1], ps[2]))])
    within = [c for c in t["comparisons"] if c["mode"] == "dump_all-retrieve"]
    assert [(c["a"], c["b"]) for c in within] == [("amem_x", "amem_x")]
    assert not [c for c in t["comparisons"] if c["mode"] == "retrieve"]  # only one run has retrieve


def test_tables_are_reproducible_and_json_round_trips(tmp_path):
    first = tables_of(tmp_path)
    (tmp_path / "t.db").unlink()
    second = tables_of(tmp_path)
    assert first == second
    assert orjson.loads(render(first, "json")) == first


def test_no_bootstrap_means_no_intervals(tmp_path):
    t = tables_of(tmp_path, bootstrap=0)
    assert t["table2"][0]["B_dump_all_ci95"] is None and t["comparisons"][0]["p"] is None


def test_renderers(tmp_path):
    t = tables_of(tmp_path)
    md = render(t, "md")
    assert "## Table 2" in md and "nomem_p (partial)" in md and "n/a" in md and "±" in md
    latex = render(t, "latex")
    assert latex.count(r"\begin{tabular}") == 13 and r"amem\_x" in latex  # + health, utilization, carryover, prompts, judges (2)
    csv_text = render(t, "csv")
    assert csv_text.startswith("# table2\n") and "B_dump_all_ci95_low" in csv_text and "per_user" not in csv_text


def test_robustness_by_hand(tmp_path):
    # the variant re-judges amem_x's dump_all: u1 loses one rubric level everywhere, u2 and u3 unchanged
    variant = [Scores.reconstruction_statement(row) for row in
               scored("amem_x", "dump_all", {"u1": 0.75, "u2": 0.5, "u3": 0.25}, variant="v2",
                      overflow=(("u3", "skill_memory_0"),))]
    rob = with_store(tmp_path, lambda s: compare_variants(s, ["amem_x", "mem0_imp"], "v2"), variant)
    assert rob["targets"] == 93
    assert rob["exact_agreement"] == pytest.approx(62 / 93)
    assert rob["within_one_level"] == 1.0
    assert rob["mean_shift"] == pytest.approx(-31 * 0.25 / 93)
    (mode,) = rob["modes"]
    assert mode["best_default"] == mode["best_variant"] == "amem_x"
    assert rob["system_pairs"] == 0  # only one run has the variant
    # csv: the summary, then one section per mode and per run (each run's interval as _low/_high)
    csv_text = render({"robustness": rob}, "csv")
    assert "# robustness_modes\n" in csv_text and "# robustness_runs\nrun,mode,k,users," in csv_text
    assert "diff_ci95_low" in csv_text


def test_cli_json_only_and_errors(tmp_path, capsys):
    with_store(tmp_path, lambda s: anyio.sleep(0))
    db = str(tmp_path / "t.db")
    main(["tables", "--db", db, "--format", "json", "--only", "table2", "--bootstrap", "200"])
    data = orjson.loads(capsys.readouterr().out)
    assert list(data) == ["table2"] and len(data["table2"]) == 3
    main(["tables", "--db", db, "--out", str(tmp_path / "out"), "--bootstrap", "200"])
    written = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"tables.json", "tables.md", "tables.tex", "table2.csv", "recovery_by_category.png",
            "recovery_by_category.svg", "dump_retrieve_gap.png", "dump_retrieve_gap.svg"} <= written
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main(["tables", "--db", db, "--runs", "nope"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("memaudit: error:") and "nope" in err and "\n" not in err
    with pytest.raises(SystemExit):
        main(["tables", "--db", str(tmp_path / "missing.db")])
    assert "no store here" in capsys.readouterr().err
    assert not (tmp_path / "missing.db").exists()


def test_imported_release_tables_match_its_raw_files(tmp_path):
    """Table 2, 3 and 4 of an imported release equal what its raw per-user files say."""
    from memaudit.release.importer import import_release
    from memaudit.testing.release_fixture import write_release

    root = write_release(tmp_path / "release", users=4, runs=("amem_pooled_4", "nomem_pooled_4"), turns=4, seed=3)

    async def go():
        store = await Store.open(tmp_path / "imported.db")
        try:
            await import_release(store, root)
            return await compute_tables(store, bootstrap=200)
        finally:
            await store.close()
    t = anyio.run(go)

    def load(path):
        return orjson.loads(path.read_bytes())

    users = [f"user_{i:03d}" for i in range(1, 5)]
    per_user = {"A": [], "D": [], "C": [], "B": [], "items": [], "chars": []}
    counts = {"ok": 0, "memory_failure": 0}
    for u in users:
        episodes = [load(root / "history" / "amem_pooled_4" / u / f"episode_{i}.json") for i in range(1, 32)]
        per_user["A"].append(sum(e["end_reason"] == "satisfied" for e in episodes) / 31)
        per_user["C"].append(sum(len(e["turns"]) for e in episodes) / 31)
        scores = [t["preference_evaluator"]["score"] for e in episodes for t in e["turns"]
                  if t["preference_evaluator"]["score"] is not None]
        per_user["D"].append(sum(scores) / len(scores))
        memories = load(root / "memory" / "amem_pooled_4" / u / "memories.json")["memories"]
        per_user["items"].append(len(memories))
        per_user["chars"].append(sum(len(m["content"]) for m in memories) / len(memories))
        details = load(root / "output" / "amem_pooled_4" / "recon_judge" / f"{u}.json")["details"]
        means = [statistics.mean(d["score"] for d in details if d["category"] == c) for c in CATEGORIES]
        per_user["B"].append(statistics.mean(means))
        for d in load(root / "output" / "amem_pooled_4" / "attribution" / f"{u}.json")["details"]:
            counts[d["attribution"]["category"]] += 1

    amem = by_run(t["table2"], run="amem_pooled_4")[0]
    assert amem["A"] == pytest.approx(100 * statistics.mean(per_user["A"]))
    for key in ("D", "C", "items", "chars"):
        assert amem[key] == pytest.approx(statistics.mean(per_user[key])), key
    assert amem["B_dump_all"] == pytest.approx(statistics.mean(per_user["B"]))
    assert amem["B_dump_all_std"] == pytest.approx(statistics.stdev(per_user["B"]))
    assert amem["B_retrieve"] is not None and amem["tokens"] is None and amem["B_retrieve_per_Mtok"] is None
    nomem = by_run(t["table2"], run="nomem_pooled_4")[0]
    assert nomem["B_retrieve"] is None and nomem["items"] == 0
    row4 = by_run(t["table4"], run="amem_pooled_4", mode="dump_all")[0]
    assert (row4["ok"], row4["memory_failure"]) == (counts["ok"], counts["memory_failure"])
    assert row4["recovery_rate"] == pytest.approx(counts["ok"] / (counts["ok"] + counts["memory_failure"]))
    assert by_run(t["table3"], run="amem_pooled_4", mode="dump_all")[0]["overall"] == pytest.approx(amem["B_dump_all"])
    pairs = {(c["a"], c["b"]) for c in t["comparisons"] if c["mode"] == "dump_all"}
    assert pairs == {("amem_pooled_4", "nomem_pooled_4")}
