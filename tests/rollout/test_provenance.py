"""Every run says how it was made: tables carry the models per role, read from the call log."""
from __future__ import annotations

import orjson
import pytest

from memaudit.cli import main
from memaudit.rollout.runner import run_rollout
from memaudit.scoring.recovery import score_runs
from memaudit.tables.columns import models_text
from memaudit.tables.paper import compute_tables
from memaudit.tables.paper_render import render
from memaudit.testing.http_server import serve
from tests.rollout.test_cli_inprocess import rollout, store_tiny_bench

pytestmark = pytest.mark.anyio


async def test_table2_rows_carry_the_models_per_role(open_rt, fake, bench):
    async with open_rt() as rt:
        await rt.store.benchmarks.save(bench)
        await run_rollout(rt, bench, ["amem"], users=["user_001"], tasks=1, max_turns=1, progress=False)
        await score_runs(rt, ["amem"], ["dump_all"], dims="targeted")
        (row,) = (await compute_tables(rt.store, bootstrap=0))["table2"]
        (scored,) = await rt.store.scores.passes("amem")
        md = render(await compute_tables(rt.store, bootstrap=0), "md")
    assert row["models"] == {role: "fake-model" for role in
                             ("agent", "memory", "pref_judge", "recovery_judge", "simulator", "slot_fill")}
    assert "| fake-model |" in md
    provenance = scored.config.scorer["provenance"]
    assert provenance["memory_json"] == "indent2-native-order"
    assert provenance["roles"]["slot_fill"]["model"] == "fake-model" and provenance["protocol"]


def test_models_text_groups_roles_by_model():
    assert models_text({"agent": "a", "simulator": "a"}) == "a"
    assert models_text({"agent": "a", "memt_policy": "m", "simulator": "a"}) == "a: agent, simulator; m: memt_policy"
    assert models_text({}) == "–"


def test_tables_json_and_the_report_show_the_models(tmp_path, capsys):
    db = tmp_path / "m.db"
    store_tiny_bench(db)
    with serve() as url:
        rollout(url, db, "--tasks", "1", "--max-turns", "1", "--quiet")
    capsys.readouterr()
    main(["tables", "--db", str(db), "--format", "json", "--only", "table2", "--bootstrap", "0"])
    (row,) = orjson.loads(capsys.readouterr().out)["table2"]
    assert row["models"] == {"agent": "fake", "pref_judge": "fake", "simulator": "fake"}
    main(["view", "--db", str(db), "--out", str(tmp_path / "report")])
    index = (tmp_path / "report" / "index.html").read_text()
    assert "<th>models</th>" in index and '<td class="models">fake</td>' in index


def test_the_embedded_models_demo_settings_are_in_the_provenance_and_a_configured_endpoints_are_not():
    from memaudit.config import EMBEDDED_REPAIR_ATTEMPTS, load_settings
    from memaudit.provenance import rollout_provenance

    embedded = rollout_provenance(load_settings(env={}))["roles"]
    configured = rollout_provenance(load_settings(base_url="http://127.0.0.1:9/v1", model="m", env={}))["roles"]
    assert {r["repair_attempts"] for r in embedded.values()} == {EMBEDDED_REPAIR_ATTEMPTS}
    assert embedded["simulator"]["max_tokens"] == 128
    assert not any("repair_attempts" in r for r in configured.values())
    assert configured["simulator"]["max_tokens"] is None


def test_a_run_records_its_embedding_model_where_it_is_not_the_bundled_one(tmp_path):
    from memaudit.config import load_settings
    from memaudit.provenance import REPLAY_URL, recorded_settings, rollout_provenance

    assert "embeddings" not in rollout_provenance(load_settings(env={}))  # as runs recorded before
    config = tmp_path / "embed.toml"
    config.write_text('[default]\nembed_model = "e5"\nembed_base_url = "http://user:secret@gpu:8001/v1"\n'
                      '[roles.memt_policy]\nembed_model = "bge-local"\n')
    settings = load_settings(config=config, env={"MEMAUDIT_API_KEY": "sk-never-recorded"})
    recorded = rollout_provenance(settings)["embeddings"]
    assert recorded == {"memory": {"model": "e5", "endpoint": True}, "memt_policy": {"model": "bge-local", "endpoint": False}}
    assert "secret" not in orjson.dumps(recorded).decode()
    # replay rebuilds them from the record alone: the endpoint's vectors are read from the store
    rebuilt = recorded_settings(load_settings(env={}), {}, embeddings=recorded)
    assert rebuilt.embedding("memory") == ("e5", REPLAY_URL, None)
    assert rebuilt.embedding("memt_policy") == ("bge-local", None, None)
