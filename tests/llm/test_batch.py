"""Batch scoring against the loopback fake of the Files and Batches endpoints: `score --batch` ->
`batch status` -> `batch collect` -> `score` gives what live scoring gives, call for call."""
from __future__ import annotations

import shutil
from pathlib import Path

import anyio
import orjson
import pytest

from memaudit.cli import main
from memaudit.store import open_store
from memaudit.testing.fake_batches import FakeBatchAPI, run_batch_file
from memaudit.testing.http_server import serve
from tests.scoring.recorded import record, runtime, script

SCORING_ROLES = ("slot_fill", "recovery_judge", "oracle", "disclosure", "elicitation")


def bad_first_fill(body: dict):
    """An invalid first answer for one dimension's slot-fill (content-keyed, so live and batch meet
    it on the same call): both paths must repair it the same way."""
    prompt = str(body["messages"])
    if "skill_memory_dim_1" in prompt and "Answer again" not in prompt:
        return "{not json"
    return {"label": "fake label", "reason": "the memory says so"}


def make_fake() -> FakeBatchAPI:
    fake = script(FakeBatchAPI())
    fake.on("slot_fill", bad_first_fill)
    return fake


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, request) -> Path:
    """One recorded rollout (longctx_full and nomem, 2 users), copied by each test."""
    db = tmp_path_factory.mktemp("recorded") / "recorded.db"
    from memaudit.config import load_settings

    settings = load_settings(db=db, base_url="http://fake.test/v1", model="fake-model", backend="openai", env={})

    async def go():
        async with runtime(settings, script(FakeBatchAPI())) as rt:
            await record(rt)
    anyio.run(go)
    return db


def copy(recorded: Path, tmp_path: Path, name: str) -> Path:
    db = tmp_path / f"{name}.db"
    shutil.copy(recorded, db)
    return db


def cli(capsys, db: Path, url: str, *args) -> tuple[int, str, str]:
    code = 0
    try:
        main(["--db", str(db), "--base-url", url, "--model", "fake-model", "--backend", "openai", *args])
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def calls(db: Path) -> dict:
    """key -> (role, ok, response) of the scoring calls: what replay and the tables are made from."""
    async def go():
        async with open_store(db) as store:
            rows = await store.fetchall(
                f"SELECT key, role, ok, response FROM calls WHERE role IN ({','.join('?' * len(SCORING_ROLES))})",
                SCORING_ROLES)
            return {r["key"]: (r["role"], r["ok"], r["response"]) for r in rows}
    return anyio.run(go)


def pending(db: Path) -> list:
    async def go():
        async with open_store(db) as store:
            return [dict(r) for r in await store.fetchall("SELECT key, batch, note, attempt FROM batch_requests")]
    return anyio.run(go)


def tables(capsys, db: Path, url: str) -> dict:
    code, out, err = cli(capsys, db, url, "tables", "--format", "json")
    assert code == 0, err
    return orjson.loads(out)


def live(capsys, recorded, tmp_path, url) -> Path:
    db = copy(recorded, tmp_path, "live")
    for stage in (["score", "--mode", "dump_all"], ["attribute", "--mode", "dump_all"]):
        code, _, err = cli(capsys, db, url, *stage)
        assert code == 0, err
    return db


def batch_rounds(capsys, db: Path, url: str, stage: list[str]) -> int:
    """Run the stage with --batch and collect until it waits for nothing; the number of rounds."""
    for rounds in range(1, 6):
        code, _, err = cli(capsys, db, url, *stage, "--batch")
        assert code == 0, err
        if "nothing to wait for" in err:
            return rounds
        assert "waiting for" in err
        for _ in range(3):  # validating -> in_progress -> completed, one state per look
            code, out, err = cli(capsys, db, url, "batch", "status")
            assert code == 0, err
        code, out, err = cli(capsys, db, url, "batch", "collect")
        assert code == 0, err
    raise AssertionError("the stage never finished")


def test_batch_scoring_gives_the_live_tables_call_for_call(recorded, tmp_path, capsys):
    fake = make_fake()
    with serve(fake) as url:
        expected = live(capsys, recorded, tmp_path, url)
        live_bodies = {orjson.dumps(b) for b in fake.requests}
        db = copy(recorded, tmp_path, "batch")
        # slot-fill, its repair, the judge, then the check that nothing waits
        assert batch_rounds(capsys, db, url, ["score", "--mode", "dump_all"]) == 4
        assert batch_rounds(capsys, db, url, ["attribute", "--mode", "dump_all"]) >= 2
        code, _, err = cli(capsys, db, url, "score", "--mode", "dump_all")
        assert code == 0 and "batch" not in err
        assert tables(capsys, db, url) == tables(capsys, expected, url)
        code, out, err = cli(capsys, db, url, "replay")
        assert code == 0 and out.strip() == "identical", err
    got, want = calls(db), calls(expected)
    assert got.keys() == want.keys()
    assert all(got[k][:3] == want[k][:3] for k in want)  # the same response bytes, failures included
    sent = [orjson.loads(line) for purpose, content in fake.files.values() if purpose == "batch"
            for line in content.splitlines()]
    assert {line["url"] for line in sent} == {"/v1/chat/completions"}
    assert all(line["custom_id"] in want for line in sent)
    assert {orjson.dumps(line["body"]) for line in sent} <= live_bodies  # exactly what the live path POSTs
    assert pending(db) == []


def test_a_second_score_before_collect_says_what_it_waits_for(recorded, tmp_path, capsys):
    fake = make_fake()
    with serve(fake) as url:
        db = copy(recorded, tmp_path, "waiting")
        code, _, err = cli(capsys, db, url, "score", "--mode", "dump_all", "--batch")
        assert code == 0 and "sent 62 requests as batch batch_" in err
        code, _, err = cli(capsys, db, url, "score", "--mode", "dump_all", "--batch")
        assert code == 0 and "sent" not in err
        assert "waiting for 62 results in batch_" in err and "(validating)" in err
        assert len(fake.batches) == 1
        code, out, _ = cli(capsys, db, url, "batch", "status", "--json")
        rows = [orjson.loads(line) for line in out.splitlines()]
        assert rows[0]["status"] == "in_progress" and rows[0]["waiting"] == 62 and rows[-1]["waiting"] == 0


def test_expired_batch_and_retryable_lines_are_sent_again(recorded, tmp_path, capsys):
    fake = script(FakeBatchAPI())
    with serve(fake) as url:
        expected = live(capsys, recorded, tmp_path, url)
        db = copy(recorded, tmp_path, "expired")
        fake.outcomes = ["expired"]
        fake.expire_after = 5
        fake.faults = [503, 429]  # two of the answered lines go to the error file as retryable
        code, _, err = cli(capsys, db, url, "score", "--mode", "dump_all", "--batch")
        assert code == 0, err
        for _ in range(3):
            cli(capsys, db, url, "batch", "status")
        code, out, err = cli(capsys, db, url, "batch", "collect")
        assert code == 0, err
        assert ": expired: 3 results" in out and "59 to send again" in out
        waiting = pending(db)
        assert len(waiting) == 59 and all(r["batch"] is None for r in waiting)
        assert sum("batch_expired" in r["note"] for r in waiting) == 57
        assert sum("HTTP 503" in r["note"] or "HTTP 429" in r["note"] for r in waiting) == 2
        code, out, err = cli(capsys, db, url, "batch", "resubmit")
        assert code == 0 and "sent 59 requests" in out
        assert batch_rounds(capsys, db, url, ["score", "--mode", "dump_all"]) >= 3
        assert batch_rounds(capsys, db, url, ["attribute", "--mode", "dump_all"]) >= 2
        assert tables(capsys, db, url) == tables(capsys, expected, url)
    got, want = calls(db), calls(expected)
    assert got == {k: v for k, v in got.items() if k in want} and got.keys() == want.keys()


def test_failed_batch_sends_everything_again(recorded, tmp_path, capsys):
    fake = make_fake()
    with serve(fake) as url:
        db = copy(recorded, tmp_path, "failed")
        fake.outcomes = ["failed"]
        cli(capsys, db, url, "score", "--mode", "dump_all", "--batch")
        for _ in range(2):
            cli(capsys, db, url, "batch", "status")
        code, out, err = cli(capsys, db, url, "batch", "collect")
        assert code == 0, err
        assert "failed (the input file could not be validated): 0 results" in out
        assert "62 requests to send again" in out
        code, _, err = cli(capsys, db, url, "score", "--mode", "dump_all", "--batch")
        assert code == 0 and "sent 62 requests" in err


def test_batch_files_for_vllm_and_collect_from_its_output(recorded, tmp_path, capsys):
    fake = make_fake()
    with serve(fake) as url:
        expected = live(capsys, recorded, tmp_path, url)
        db = copy(recorded, tmp_path, "files")
        out_dir = tmp_path / "batches"
        for _ in range(4):
            code, _, err = cli(capsys, db, url, "score", "--mode", "dump_all", "--batch-file", str(out_dir))
            assert code == 0, err
            if "nothing to wait for" in err:
                break
            assert "`vllm run-batch -i FILE -o OUTPUT --model MODEL` on each file written, then `memaudit batch " \
                   "collect --from OUTPUT`" in err
            written = [Path(line.split(" to ", 1)[1]) for line in err.splitlines() if "wrote" in line]
            assert written and all(p.parent == out_dir for p in written)
            for path in written:
                run_batch_file(fake, path, path.with_suffix(".out.jsonl"))
                code, out, err = cli(capsys, db, url, "batch", "collect", "--from", str(path.with_suffix(".out.jsonl")))
                assert code == 0, err
        assert "nothing to wait for" in err
        assert fake.batches == {}  # nothing was uploaded
    got, want = calls(db), calls(expected)
    assert all(got[k] == want[k] for k in got) and {r for r, _, _ in got.values()} == {"slot_fill", "recovery_judge"}


def test_bad_batch_options_are_one_line(recorded, tmp_path, capsys):
    db = copy(recorded, tmp_path, "bad")
    code, _, err = cli(capsys, db, "http://127.0.0.1:9/v1", "score", "--mode", "dump_all", "--batch",
                       "--cache", "off")
    assert code == 2 and "--cache rw" in err and err.count("\n") == 1
    code, out, err = cli(capsys, db, "http://127.0.0.1:9/v1", "batch", "collect", "--from", "missing.jsonl")
    assert code == 2 and "missing.jsonl" in err
    # a vLLM server has no Batch API: refused before anything is recorded, naming the role
    code, _, err = cli(capsys, db, "http://127.0.0.1:9/v1", "score", "--mode", "dump_all", "--batch",
                       "--backend", "vllm")
    assert code == 2 and "role slot_fill" in err and "--batch-file" in err and err.count("\n") == 1
    assert pending(db) == []


def test_collect_killed_half_way_loses_nothing(recorded, tmp_path, capsys):
    """The collect process is killed while it downloads the error file, after it applied the
    output file; run again, it ends where an uninterrupted collect ends."""
    import subprocess
    import sys
    import threading

    repo = Path(__file__).resolve().parents[2]
    fake = script(FakeBatchAPI())
    reached, release = threading.Event(), threading.Event()
    with serve(fake) as url:
        dbs = {name: copy(recorded, tmp_path, name) for name in ("whole", "killed")}
        for name, db in dbs.items():
            fake.faults = [503]  # one line goes to the error file
            code, _, err = cli(capsys, db, url, "score", "--mode", "dump_all", "--batch")
            assert code == 0, err
            for _ in range(3):
                cli(capsys, db, url, "batch", "status")
        code, _, err = cli(capsys, dbs["whole"], url, "batch", "collect")
        assert code == 0, err
        killed = max(fake.batches.values(), key=lambda b: b["created_at"])

        def hold(file_id):
            if file_id == killed["error_file_id"] and not release.is_set():
                reached.set()
                release.wait(timeout=300)
        fake.before_content = hold
        victim = subprocess.Popen([sys.executable, str(repo / "memaudit.py"), "--db", str(dbs["killed"]),
                                   "--base-url", url, "--model", "fake-model", "--backend", "openai",
                                   "batch", "collect"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            assert reached.wait(timeout=300)
            victim.kill()
            victim.wait(timeout=60)
        finally:
            release.set()
        assert len(calls(dbs["killed"])) == 61  # the output file was applied before the kill
        code, out, err = cli(capsys, dbs["killed"], url, "batch", "collect")
        assert code == 0, err
        assert "61 already collected" in out and "1 to send again" in out
    whole, resumed = calls(dbs["whole"]), calls(dbs["killed"])
    assert whole.keys() == resumed.keys() and all(whole[k] == resumed[k] for k in whole)
    assert [(r["key"], r["batch"]) for r in pending(dbs["killed"])] == [
        (r["key"], r["batch"]) for r in pending(dbs["whole"])]


def test_status_of_a_store_without_batches_says_so(recorded, tmp_path, capsys):
    code, out, _ = cli(capsys, copy(recorded, tmp_path, "none"), "http://127.0.0.1:9/v1", "batch", "status")
    assert code == 0 and out.startswith("no batches in this store")


def test_score_batch_with_a_judge_panel(recorded, tmp_path, capsys):
    """Every panel judge's call of a target is sent in the same round (none cancels another), and
    the panel's scores and verdicts equal live scoring's."""
    from tests.judges.helpers import fixed_judges

    fake = fixed_judges(make_fake())
    stage = ["score", "--mode", "dump_all", "--judges", "top-a,top-b,low"]
    with serve(fake) as url:
        expected = copy(recorded, tmp_path, "live")
        code, _, err = cli(capsys, expected, url, *stage)
        assert code == 0, err
        db = copy(recorded, tmp_path, "panel")
        assert batch_rounds(capsys, db, url, stage) == 4  # slot-fill, its repair, the panel, nothing left
        code, _, err = cli(capsys, db, url, *stage)
        assert code == 0 and "batch" not in err
        assert tables(capsys, db, url) == tables(capsys, expected, url)
        code, out, err = cli(capsys, db, url, "replay")
        assert code == 0 and out.strip() == "identical", err
    assert calls(db) == calls(expected)
