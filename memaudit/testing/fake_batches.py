"""The OpenAI Files and Batches endpoints as documented, on top of `FakeOpenAI` (whose scripted
answers and injected faults answer each batch line), for the loopback server:

    fake = FakeBatchAPI()
    fake.outcomes = ["expired"]        # how the next batches end: completed (default) | expired | failed
    fake.expire_after = 2              # lines an expiring batch answers before its window closes
    with serve(fake) as url: ...

A batch moves one state per `GET /batches/{id}`: validating -> in_progress -> its outcome. On
reaching it, its lines are answered: 200 answers go to the output file; other statuses to the
error file with their status and body; lines an expired batch never reached to the error file with
`response: null` and the code `batch_expired`. A failed batch (input validation) has neither file.
`before_content(file_id)`, when set, runs before a file's content is served (a test's hook)."""
from __future__ import annotations

import itertools
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Callable

import orjson

from memaudit.testing.fake_openai import FakeOpenAI

STATES = ("validating", "in_progress")
CHAT_URL = "/v1/chat/completions"


class FakeBatchAPI(FakeOpenAI):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.files: dict[str, tuple[str, bytes]] = {}   # id -> (purpose, content)
        self.batches: dict[str, dict] = {}
        self.outcomes: list[str] = []
        self.expire_after = 0
        self.before_content: Callable[[str], None] | None = None
        self._ids = itertools.count(1)
        self._auth: dict[str, str | None] = {}

    def reply_http(self, method: str, path: str, headers: dict, content: bytes):
        route = path.split("?")[0].removeprefix("/v1")
        auth = headers.get("authorization")
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            return self._status(401, {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}})
        if route == "/files" and method == "POST":
            return self._upload(headers.get("content-type", ""), content)
        if route == "/batches" and method == "POST":
            return self._create(orjson.loads(content), auth)
        if route == "/batches" and method == "GET":
            listed = sorted(self.batches.values(), key=lambda b: b["created_at"], reverse=True)
            return self._status(200, {"object": "list", "data": listed, "has_more": False})
        if route.startswith("/batches/") and method == "GET":
            return self._advance(route.rsplit("/", 1)[1])
        if route.startswith("/files/") and route.endswith("/content") and method == "GET":
            return self._content(route.split("/")[2])
        return super().reply_http(method, path, headers, content)

    def _upload(self, content_type: str, content: bytes):
        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + content)
        parts = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()}
        if "file" not in parts or "purpose" not in parts:
            return self._status(400, {"error": {"message": "file and purpose are required"}})
        purpose = parts["purpose"].get_content().strip()
        data = parts["file"].get_payload(decode=True)
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = (purpose, data)
        return self._status(200, {"id": file_id, "object": "file", "bytes": len(data), "created_at": 0,
                                  "filename": parts["file"].get_filename(), "purpose": purpose})

    def _create(self, body: dict, auth: str | None):
        file_id = body.get("input_file_id")
        if file_id not in self.files or self.files[file_id][0] != "batch":
            return self._status(400, {"error": {"message": f"no batch input file {file_id}"}})
        if body.get("endpoint") != CHAT_URL or body.get("completion_window") != "24h":
            return self._status(400, {"error": {"message": "endpoint or completion_window not supported"}})
        batch_id = f"batch_{next(self._ids)}"
        total = len(self.files[file_id][1].splitlines())
        self.batches[batch_id] = {
            "id": batch_id, "object": "batch", "endpoint": CHAT_URL, "errors": None, "input_file_id": file_id,
            "completion_window": "24h", "status": "validating", "output_file_id": None, "error_file_id": None,
            "created_at": len(self.batches), "request_counts": {"total": total, "completed": 0, "failed": 0},
            "metadata": None, "_outcome": self.outcomes.pop(0) if self.outcomes else "completed"}
        self._auth[batch_id] = auth
        return self._status(200, self._public(batch_id))

    def _public(self, batch_id: str) -> dict:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    def _advance(self, batch_id: str):
        batch = self.batches.get(batch_id)
        if batch is None:
            return self._status(404, {"error": {"message": f"no batch {batch_id}"}})
        if batch["status"] in STATES:
            at = STATES.index(batch["status"])
            if at + 1 < len(STATES):
                batch["status"] = STATES[at + 1]
            else:
                self._finish(batch)
        return self._status(200, self._public(batch_id))

    def _finish(self, batch: dict) -> None:
        outcome = batch["_outcome"]
        if outcome == "failed":
            batch.update(status="failed", errors={"object": "list", "data": [
                {"code": "invalid_request", "line": 1, "message": "the input file could not be validated"}]})
            return
        lines = [orjson.loads(raw) for raw in self.files[batch["input_file_id"]][1].splitlines()]
        reached = len(lines) if outcome == "completed" else self.expire_after
        results = [self._line(batch, line) for line in lines[:reached]]
        done = [r for r in results if r["response"] is not None and r["response"]["status_code"] == 200]
        failed = [r for r in results if r not in done] + [
            {"id": f"req_{line['custom_id']}", "custom_id": line["custom_id"], "response": None,
             "error": {"code": "batch_expired", "message": "not done within the completion window"}}
            for line in lines[reached:]]
        batch["request_counts"] = {"total": len(lines), "completed": len(done), "failed": len(failed)}
        batch["output_file_id"] = self._store_file("batch_output", done)
        batch["error_file_id"] = self._store_file("batch_output", failed)
        batch["status"] = outcome

    def _line(self, batch: dict, line: dict) -> dict:
        reply = self.reply(line["url"], self._auth[batch["id"]], orjson.dumps(line["body"]))
        if reply is None:
            return {"id": f"req_{line['custom_id']}", "custom_id": line["custom_id"], "response": None,
                    "error": {"code": "request_timeout", "message": "the model call timed out"}}
        status, payload, _ = reply
        return {"id": f"req_{line['custom_id']}", "custom_id": line["custom_id"],
                "response": {"status_code": status, "request_id": "fake", "body": payload}, "error": None}

    def _store_file(self, purpose: str, lines: list[dict]) -> str | None:
        if not lines:
            return None
        file_id = f"file-{next(self._ids)}"
        self.files[file_id] = (purpose, b"".join(orjson.dumps(line) + b"\n" for line in lines))
        return file_id

    def _content(self, file_id: str):
        if file_id not in self.files:
            return self._status(404, {"error": {"message": f"no file {file_id}"}})
        if self.before_content is not None:
            self.before_content(file_id)
        return self._status(200, self.files[file_id][1])


def run_batch_file(fake: FakeOpenAI, input_path: Path, output_path: Path) -> None:
    """What vLLM's batch runner (`vllm run-batch`) does with an input file of `--batch-file`: `fake`
    answers each line; one output line per request, for `batch collect --from`."""
    lines = []
    for raw in input_path.read_bytes().splitlines():
        line = orjson.loads(raw)
        status, payload, _ = fake.reply(line["url"], None, orjson.dumps(line["body"]))
        lines.append({"id": f"vllm-{line['custom_id'][-8:]}", "custom_id": line["custom_id"],
                      "response": {"status_code": status, "request_id": "vllm-batch", "body": payload},
                      "error": None})
    output_path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
