"""Overflow measured without the server's /tokenize: the model's own tokenizer when it is on this
machine (offline), else nothing, said in one line, and the server's context-length error decides."""
from __future__ import annotations

import anyio
import pytest

from memaudit.scoring.recovery import score_runs
from memaudit.testing.http_server import serve
from tests.cli_main import memaudit
from tests.scoring.recorded import record, requests_for, runtime, script


def cached_tokenizer(cache, repo: str) -> None:
    """A one-token-per-word tokenizer for `repo` in a Hugging Face cache laid out as the hub writes it."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    folder = cache / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("0123abcd")
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(snapshot / "tokenizer.json"))


@pytest.mark.anyio
async def test_without_a_tokenize_route_the_models_own_tokenizer_counts_offline(settings, fake, tmp_path,
                                                                                monkeypatch):
    """The model's tokenizer from the local cache decides overflow before the call; the pass records it."""
    cached_tokenizer(tmp_path / "hub", "fake-model")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    script(fake)
    fake.tokenize = False
    async with runtime(settings, fake) as rt:
        await record(rt, ("longctx_full",), users=1, tasks=1)
        await score_runs(rt, ["longctx_full"], ["dump_all"], context_window=300, dims="targeted")
        (row,) = await rt.store.scores.load("longctx_full", "dump_all")
        (recorded,) = await rt.store.scores.passes("longctx_full")
        counter = rt.llm.counted_by["slot_fill"]
    assert row.status == "overflow" and requests_for(fake, "slot_fill") == []
    assert "models--fake-model" in counter
    assert recorded.config.scorer["overflow_count"].startswith("the server's /tokenize, else the model's tokenizer")


def test_no_tokenizer_on_this_machine_is_said_in_one_line(settings, fake, tmp_path, monkeypatch, capsys):
    """Nothing counts (no route, no local tokenizer): the server's error decides, and score says so."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    script(fake)
    fake.tokenize = False

    async def recorded():
        async with runtime(settings, fake) as rt:
            await record(rt, ("longctx_full",), users=1, tasks=1)
    anyio.run(recorded)
    with serve(fake) as url:
        code = memaudit("--db", settings.db, "--base-url", url, "--model", "fake-model", "--backend", "openai",
                        "score", "--mode", "dump_all", "--dims", "targeted", "--context-window", "100000")
    err = capsys.readouterr().err
    assert code == 0
    (line,) = [line for line in err.splitlines() if "no token count" in line]
    assert "fake-model" in line and "context-length error" in line
