"""`judge-check --batch` against the loopback fake of the Files and Batches endpoints: the control
answers go out in one round, every panel judge's verdicts in the next, and the same judge-check then
finishes from the cache with what the live path gives, call for call; replay stays `identical`."""
from __future__ import annotations

from pathlib import Path

import anyio
import orjson

from memaudit.store import open_store
from memaudit.testing.fake_batches import FakeBatchAPI
from memaudit.testing.http_server import serve
from tests.judges.helpers import fixed_judges
from tests.llm.test_batch import cli, copy, pending, recorded  # noqa: F401  (recorded: the shared fixture)
from tests.scoring.recorded import script

CHECK = ["judge-check", "--judges", "top-a,top-b,low", "--per-category", "2"]
CHECK_ROLES = ("control_writer", "recovery_judge")


def make_fake() -> FakeBatchAPI:
    return fixed_judges(script(FakeBatchAPI()))


def check_rows(db: Path) -> dict:
    """The check's stored outcome and calls: control answers, verdicts, and the calls they came from."""
    async def go():
        async with open_store(db) as store:
            out = {}
            for table in ("control_answers", "control_verdicts"):
                rows = await store.fetchall(f"SELECT * FROM {table}")
                out[table] = sorted(tuple(r) for r in rows)
            rows = await store.fetchall("SELECT key, role, ok, response FROM calls WHERE role IN (?, ?)", CHECK_ROLES)
            out["calls"] = {r["key"]: (r["role"], r["ok"], r["response"]) for r in rows}
            return out
    return anyio.run(go)


def rounds(capsys, db: Path, url: str, check: list[str], config: tuple = ()) -> list[tuple[str, str]]:
    """`judge-check --batch`, then status and collect, until it waits for nothing: (stdout, stderr)
    of every --batch run. `config`: options every command is given (the batch commands need the
    endpoints too)."""
    seen = []
    for _ in range(5):
        code, out, err = cli(capsys, db, url, *check, *config, "--batch")
        assert code == 0, err
        seen.append((out, err))
        if "nothing to wait for" in err:
            return seen
        assert "waiting for" in err and "Traceback" not in err
        for _ in range(3):  # validating -> in_progress -> completed
            assert cli(capsys, db, url, "batch", "status", *config)[0] == 0
        code, _, err = cli(capsys, db, url, "batch", "collect", *config)
        assert code == 0, err
    raise AssertionError("judge-check --batch never finished")


def test_judge_check_batch_gives_the_live_check_call_for_call(recorded, tmp_path, capsys):  # noqa: F811
    fake = make_fake()
    with serve(fake) as url:
        live = copy(recorded, tmp_path, "live")
        code, want_json, err = cli(capsys, live, url, *CHECK, "--format", "json")
        assert code == 0, err
        live_bodies = {orjson.dumps(b) for b in fake.requests}
        db = copy(recorded, tmp_path, "batch")
        seen = rounds(capsys, db, url, CHECK)
        # the control answers, then every panel judge's verdicts, then nothing left
        assert len(seen) == 3
        assert seen[0][0] == "judge-check: no control verdict stored for tiny yet\n"
        assert "sent 10 requests as batch" in seen[0][1]
        assert seen[1][1].count("sent ") == 3  # one batch per judge model
        code, got_json, err = cli(capsys, db, url, *CHECK, "--format", "json")
        assert code == 0 and "batch" not in err
        assert orjson.loads(got_json) == orjson.loads(want_json)
        code, out, err = cli(capsys, db, url, "replay")
        assert code == 0 and out.strip() == "identical", err
    assert check_rows(db) == check_rows(live)
    sent = [orjson.loads(line) for purpose, content in fake.files.values() if purpose == "batch"
            for line in content.splitlines()]
    assert {orjson.dumps(line["body"]) for line in sent} <= live_bodies  # exactly what the live path POSTs
    assert {line["body"]["model"] for line in sent} == {"fake-model", "top-a", "top-b", "low"}
    assert pending(db) == []


def test_judge_check_batch_empty_json_and_shards(recorded, tmp_path, capsys):  # noqa: F811
    """Nothing judged yet: json is the thresholds and no judge. --batch --shard I/N: the shards'
    rounds together store what the unsharded live check stores."""
    fake = make_fake()
    with serve(fake) as url:
        live = copy(recorded, tmp_path, "live")
        assert cli(capsys, live, url, *CHECK)[0] == 0
        db = copy(recorded, tmp_path, "sharded")
        code, out, err = cli(capsys, db, url, *CHECK, "--batch", "--format", "json", "--shard", "1/2")
        assert code == 0, err
        assert orjson.loads(out) == {"thresholds": {"max_false_pass": 0.1, "min_pass": 0.9}, "judges": {}}
        for spec in ("1/2", "2/2"):
            rounds(capsys, db, url, [*CHECK, "--shard", spec])
            assert cli(capsys, db, url, *CHECK, "--shard", spec)[0] == 0
    got, want = check_rows(db), check_rows(live)
    assert got["control_verdicts"] == want["control_verdicts"] != []
    assert got["calls"] == want["calls"]


def test_a_panel_judge_with_its_own_endpoint_gets_its_own_batches(recorded, tmp_path, capsys):  # noqa: F811
    """A `[judges.NAME]` section's endpoint and model: its batch goes there, the others' to the
    shared endpoint; replay (no model flags) rebuilds the judge from the check's provenance."""
    shared, own = make_fake(), fixed_judges(FakeBatchAPI(), {"big-low": 0.0})
    with serve(shared) as url, serve(own) as own_url:
        config = tmp_path / "judges.toml"
        config.write_text(f'[judges.low]\nbase_url = "{own_url}"\nmodel = "big-low"\n')
        with_config = ("--config", str(config))
        live = copy(recorded, tmp_path, "live")
        assert cli(capsys, live, url, *CHECK, *with_config)[0] == 0
        db = copy(recorded, tmp_path, "batch")
        rounds(capsys, db, url, CHECK, with_config)
        code, out, err = cli(capsys, db, url, "replay")
        assert code == 0 and out.strip() == "identical", err
    assert {b["model"] for b in own.requests} == {"big-low"}  # the live check's calls
    own_lines = [orjson.loads(line) for purpose, content in own.files.values() if purpose == "batch"
                 for line in content.splitlines()]
    assert own_lines and {line["body"]["model"] for line in own_lines} == {"big-low"}
    shared_models = {orjson.loads(line)["body"]["model"] for purpose, content in shared.files.values()
                     if purpose == "batch" for line in content.splitlines()}
    assert shared_models == {"fake-model", "top-a", "top-b"}
    assert check_rows(db) == check_rows(live)


def test_one_shards_check_replays_alone(recorded, tmp_path, capsys):  # noqa: F811
    """Replay re-executes a `judge-check --shard I/N` store's check on that shard's cells only (the
    other users' calls are in the other shards' stores)."""
    fake = make_fake()
    db = copy(recorded, tmp_path, "shard")
    with serve(fake) as url:
        rounds(capsys, db, url, [*CHECK, "--shard", "1/3"])  # user_001 of the two (user_002 is in 2/3)
        assert cli(capsys, db, url, *CHECK, "--shard", "1/3")[0] == 0
    assert {row[1] for row in check_rows(db)["control_answers"]} == {"user_001"}
    code, out, err = cli(capsys, db, "http://127.0.0.1:9/v1", "replay")
    assert code == 0 and out.strip() == "identical", err
