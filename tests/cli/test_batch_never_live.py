"""`--batch` never makes a live completion (issue 33): every role that `score`, `rescore`,
`attribute` and `judge-check` can call goes through the batch path, the evolving criteria and a
memory system's own calls during retrieve included. The roles are enumerated from what each stage
declares it calls (and the registry's scoring and attribution roles); a role that is called but not
declared, or called live, fails here. Counted at the fake server over loopback HTTP.

`--batch-file` finishes with no endpoint reachable: its files are answered offline, as vLLM's batch
runner would, and collected with `batch collect --from`."""
from __future__ import annotations

import shutil
import socket
import sqlite3
from pathlib import Path

import httpx
import pytest

from memaudit.roles import ROLE_SPECS, groups_of, role_group
from memaudit.scoring import attribution, evolving, judge_check, recovery
from memaudit.testing.fake_batches import run_batch_file
from memaudit.testing.http_server import scripted_fake, serve, stats_url
from tests.cli_main import memaudit

# What each command declares it calls (under --batch every call goes through the batch path anyway;
# the declaration is what the Batch API's endpoints are checked for before a round).
DECLARED = {"score": {*recovery.ROLES_CALLED, *evolving.ROLES_CALLED}, "rescore": set(recovery.ROLES_CALLED),
            "attribute": set(attribution.ROLES_CALLED), "judge-check": set(judge_check.ROLES_CALLED)}
MEMORY_GROUPS = groups_of("memory")  # a memory system's own calls (memt's searches during retrieve)
PANEL = "j-a,j-b,j-c"
# user_002's food_preparation_skill changes at task 14: a run to task 15 has an evolving target.
ROLLOUT = ["rollout", "--bench", "sample", "--users", "user_002", "--tasks", "15", "--max-turns", "1"]
COMMANDS = {
    "score": ["score", "--mode", "both", "--judges", PANEL],
    "rescore": ["rescore", "--variant", "again", "--reader-model", "other-reader", "--judges", "k-a,k-b,k-c"],
    "attribute": ["attribute", "--mode", "both"],
    "judge-check": ["judge-check", "--judges", PANEL, "--per-category", "1"],
}


def test_every_scoring_and_attribution_role_is_declared_by_a_command():
    declared = set().union(*DECLARED.values())
    staged = {name for name, spec in ROLE_SPECS.items() if spec.phase in ("scoring", "attribution")}
    assert staged <= declared, f"called by no batched command: {staged - declared}"


@pytest.fixture(scope="module")
def rolled_out(tmp_path_factory):
    """The sample's user_002 to task 15 with nomem, bm25 and memt on the loopback fake (memt embeds
    through the fake's /v1/embeddings); the fake and its URL stay up for the module."""
    folder = tmp_path_factory.mktemp("batch_never_live")
    fake = scripted_fake()
    with serve(fake) as url:
        config = folder / "config.toml"
        config.write_text(f'[roles.memt_policy]\nembed_model = "fake-embed"\nembed_base_url = "{url}"\n')
        db = folder / "rollout.db"
        assert cli(db, url, config, *ROLLOUT, "--systems", "nomem,bm25,memt") == 0
        yield db, url, config


def cli(db: Path, url: str, config: Path, *args) -> int:
    return memaudit("--db", db, "--base-url", url, "--model", "fake", "--config", config, *args)


def live_completions(url: str) -> int:
    return httpx.get(stats_url(url), timeout=30).json()["completions"]


def batched_roles(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {role for role, in conn.execute("SELECT DISTINCT role FROM batch_requests")}


def rounds(run_stage, collect) -> int:
    """Run the stage and collect its batch until it waits for nothing; the number of rounds."""
    for n in range(1, 16):
        code, err = run_stage()
        assert code == 0, err
        if "nothing to wait for" in err:
            return n
        collect()
    raise AssertionError("the stage never finished")


def test_batch_rounds_make_no_live_completion(rolled_out, tmp_path, capsys):
    source, url, config = rolled_out
    db = tmp_path / "batch.db"
    shutil.copy(source, db)
    before = live_completions(url)
    every = set()
    for command, args in COMMANDS.items():
        called = set()

        def stage():
            code = cli(db, url, config, *args, "--batch")
            called.update(batched_roles(db))  # a finished request leaves the table once collected
            return code, capsys.readouterr().err

        def collect():
            for _ in range(3):  # validating -> in_progress -> completed, one state per look
                assert cli(db, url, config, "batch", "status") == 0
            assert cli(db, url, config, "batch", "collect") == 0
            capsys.readouterr()

        assert rounds(stage, collect) > 1, command
        assert live_completions(url) == before, f"{command} --batch made live completions"
        undeclared = {r for r in called - DECLARED[command] if role_group(r) not in MEMORY_GROUPS}
        assert not undeclared, f"{command} calls roles it does not declare: {undeclared}"
        assert DECLARED[command] <= called, f"{command}: declared roles never batched: {DECLARED[command] - called}"
        every |= called
    assert any(role_group(r) in MEMORY_GROUPS for r in every)  # memt's searches during retrieve
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM evolving_judgments").fetchone()[0] > 0
        assert conn.execute("SELECT COUNT(*) FROM judge_verdicts").fetchone()[0] > 0


def test_batch_file_rounds_finish_with_no_endpoint_reachable(rolled_out, tmp_path, capsys):
    source, _, config = rolled_out
    db = tmp_path / "files.db"
    shutil.copy(source, db)
    with socket.socket() as closed:  # bound, never listening: a connection to it is refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
        answer_rounds(db, url, config, tmp_path / "batches", capsys)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM evolving_judgments").fetchone()[0] > 0
        assert conn.execute("SELECT COUNT(*) FROM attributions").fetchone()[0] > 0


def answer_rounds(db: Path, url: str, config: Path, out_dir: Path, capsys) -> None:
    offline = scripted_fake()
    for command, args in {"score": ["score", "--mode", "both", "--runs", "nomem,bm25"],
                          "attribute": ["attribute", "--mode", "both", "--runs", "nomem,bm25"]}.items():
        def stage():
            code = cli(db, url, config, *args, "--batch-file", out_dir)
            return code, capsys.readouterr().err

        def collect():
            for path in sorted(out_dir.glob("*.jsonl")):
                if path.name.endswith(".out.jsonl") or path.with_suffix(".out.jsonl").exists():
                    continue
                run_batch_file(offline, path, path.with_suffix(".out.jsonl"))
                assert cli(db, url, config, "batch", "collect", "--from", path.with_suffix(".out.jsonl")) == 0
            capsys.readouterr()

        assert rounds(stage, collect) > 1, command
