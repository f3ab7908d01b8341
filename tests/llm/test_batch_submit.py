"""Sending batches: input files split at the documented limits, and a submit killed between its
steps loses no batch id (the provider's batch is found again by its input file, never made twice)."""
from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from memaudit.llm import batch as batch_module
from memaudit.llm.batch import BatchCollector, BatchPending, split_files, submit
from memaudit.llm.batch_api import BatchAPI
from memaudit.roles import ROLE_SPECS
from memaudit.runtime import open_runtime
from memaudit.testing.fake_batches import FakeBatchAPI
from memaudit.testing.http_server import serve

pytestmark = pytest.mark.anyio


def test_files_split_at_the_request_and_byte_limits(monkeypatch):
    rows = [{"key": f"s1:{i:04d}", "body": orjson.dumps({"model": "m", "messages": [], "seed": i}).decode()}
            for i in range(10)]
    monkeypatch.setattr(batch_module, "MAX_REQUESTS", 4)
    assert [len(keys) for keys, _ in split_files(rows)] == [4, 4, 2]
    one = len(batch_module.input_line(rows[0])) + 1
    monkeypatch.setattr(batch_module, "MAX_REQUESTS", 50_000)
    monkeypatch.setattr(batch_module, "MAX_BYTES", 3 * one)
    files = split_files(rows)
    assert [len(keys) for keys, _ in files] == [3, 3, 3, 1]
    assert all(len(content) <= 3 * one for _, content in files)
    first = orjson.loads(files[0][1].splitlines()[0])
    assert first == {"custom_id": "s1:0000", "method": "POST", "url": "/v1/chat/completions",
                     "body": {"model": "m", "messages": [], "seed": 0}}


async def record_pending(rt, n: int) -> None:
    with rt.llm.batching(BatchCollector(rt.store, rt.llm.refusals)):
        for i in range(n):
            with pytest.raises(BatchPending):
                await rt.llm.call("slot_fill", [{"role": "user", "content": f"fill {i}"}], max_tokens=160,
                                  schema=ROLE_SPECS["slot_fill"].schema)


@pytest.mark.parametrize("dies", ["upload", "create", "record"])
async def test_a_submit_killed_at_any_step_loses_no_batch(settings, tmp_path, monkeypatch, dies):
    fake = FakeBatchAPI()
    real_upload, real_create = BatchAPI.upload, BatchAPI.create

    async def upload(self, filename, content):
        if dies == "upload":
            raise RuntimeError("killed")  # before the provider answered: maybe uploaded, no id known
        return await real_upload(self, filename, content)

    async def create(self, input_file_id, chat_path):
        if dies == "create":
            raise RuntimeError("killed")  # the file id is recorded, no batch made yet
        made = await real_create(self, input_file_id, chat_path)
        if dies == "record":
            raise RuntimeError("killed")  # the batch exists, its id was never recorded
        return made

    with serve(fake) as url:
        settings = replace(settings, db=tmp_path / "s.db", base_url=url)
        async with open_runtime(settings) as rt:
            await record_pending(rt, 3)
            monkeypatch.setattr(BatchAPI, "upload", upload)
            monkeypatch.setattr(BatchAPI, "create", create)
            with pytest.raises(RuntimeError, match="killed"):
                await submit(rt.store, rt.settings)
            monkeypatch.setattr(BatchAPI, "upload", real_upload)
            monkeypatch.setattr(BatchAPI, "create", real_create)
            said = await submit(rt.store, rt.settings)
            batches = await rt.store.batches.batches()
            requests = await rt.store.fetchall("SELECT batch FROM batch_requests")
    assert len(fake.batches) == 1  # never made twice
    (made,) = fake.batches
    recorded = [b for b in batches if b["batch_id"] is not None]
    assert [b["batch_id"] for b in recorded] == [made] and len(batches) == 1
    assert {r["batch"] for r in requests} == {recorded[0]["name"]} and len(requests) == 3
    if dies == "record":
        assert said == [f"found batch {made} of an interrupted submit (validating)"]


def test_one_model_and_one_endpoint_per_input_file(settings):
    from memaudit.llm.batch import groups

    rows = [{"key": f"k{i}", "role": role, "model": model}
            for i, (role, model) in enumerate([("slot_fill", "a"), ("recovery_judge", "b"), ("slot_fill", "a")])]
    grouped = groups(settings, rows, by_endpoint=True)
    assert {k: [r["key"] for r in v] for k, v in grouped.items()} == {
        (settings.base_url, None, "a"): ["k0", "k2"], (settings.base_url, None, "b"): ["k1"]}
    assert set(groups(settings, rows, by_endpoint=False)) == {(None, None, "a"), (None, None, "b")}
