"""Batch scoring: the calls of a stage go through the OpenAI Batch API (or files for vLLM's batch
runner) instead of being made live, at the batch price, and come back into the call cache.

    score --batch     the client collects: a cache miss of any call the command makes records the exact
                      body the live path would POST (`batch_requests`) and raises BatchPending, which
                      the stage treats as "not yet available" (no row, no failure). Then the recorded
                      requests are sent: JSONL input files (custom_id = the cache key), uploaded and
                      made batches, one model per file, split at 50,000 requests or 200 MB.
    batch collect     downloads output and error files and stores every result in the call cache as
                      the live path stores the same response (memaudit/llm/client.py read_attempt,
                      ok_row, failure_row). A retryable answer (429, 5xx, an expired batch's undone
                      lines) is not a result: the request waits to be sent again. An answer the live
                      path would repair queues the repair attempt.
    score             the same command then finishes from the cache.

A dependent call (the judge after the slot-fill) is only asked once its input is known: one batch
round per stage step. Kill safety: a request is committed before it is sent; a batch row exists
before its file is uploaded and records the file id before the batch is created, so a kill leaves
at worst an upload whose batch is found again by its input file (`recover`). Collecting commits
as it goes and skips lines already applied, so it can be stopped and run again."""
from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import orjson

from memaudit.config import PANEL_ROLE, Settings
from memaudit.errors import BadInput, ContextOverflow, EndpointError, InvalidOutput, MemauditError, Refusal, redact_url
from memaudit.llm.batch_api import BatchAPI
from memaudit.llm.client import empty_usage, failure_row, ok_row, read_attempt, record_body
from memaudit.llm.secrets import configured as configured_secrets
from memaudit.llm.dialects import BATCH_CHAT_URL, DIALECTS, ParameterRefused, Refusals, answer_error
from memaudit.userfiles import read_regular

if TYPE_CHECKING:
    from memaudit.store import Store

MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024
TERMINAL = ("completed", "expired", "cancelled", "failed")
COMMIT_EVERY = 500  # result lines applied per transaction while collecting
# `--batch-file` writes input files for vLLM's offline batch runner (the dialect's `batch_runner`).
FILE_RUNNER = DIALECTS["vllm"].batch_runner.format(input="FILE", output="OUTPUT", model="MODEL")
# The largest output file `batch collect --from` reads: answers to a full input file (MAX_BYTES of
# requests) are of the same order; anything far larger is not a batch runner's output.
MAX_OUTPUT_BYTES = 1024 * 1024 * 1024


class BatchPending(MemauditError):
    """The call's result is not in yet: it waits for a batch. Not a failure: the stage writes no
    row for the target and scores it on a later run. A MemauditError, so that it passes a memory
    system's boundary (adapters/boundary.py) as itself when the system's own call waits."""

    def __init__(self, role: str, key: str):
        super().__init__(f"role {role}: waiting for a batch result (key {key})")
        self.role, self.key = role, key


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _json(obj) -> str:
    """Bodies and usage keep their key order (the body is sent as it was built; usage is stored
    as the live path stores it), so they are not written as canonical JSON."""
    return orjson.dumps(obj).decode()


@dataclass
class BatchCollector:
    """The client's batch mode (`llm.batching`): every call that misses the cache is recorded, not
    made: a command under --batch makes no live completion."""
    store: Store
    refusals: Refusals
    new: set[str] = field(default_factory=set)      # keys this command recorded
    waiting: set[str] = field(default_factory=set)  # keys already recorded earlier

    async def pending(self, role: str, record: dict, key: str, request_json: str, schema: dict | None):
        if key not in self.new and key not in self.waiting:
            if await self.store.batches.request(key) is not None:
                self.waiting.add(key)
            else:
                body = record_body(record, role, schema, await self.refusals.of(record["model"], record["backend"]))
                self.store.write_later([self.store.batches.request_statement(
                    {"key": key, "role": role, "model": record["model"], "request": request_json, "attempt": 0,
                     "body": _json(body), "usage": _json(empty_usage()), "note": ""})])
                self.new.add(key)
        return BatchPending(role, key)

    @property
    def keys(self) -> list[str]:
        return sorted(self.new | self.waiting)


# -- sending -------------------------------------------------------------------------------
def input_line(row) -> bytes:
    return orjson.dumps({"custom_id": row["key"], "method": "POST", "url": BATCH_CHAT_URL,
                         "body": orjson.loads(row["body"])})


def split_files(rows: list) -> list[tuple[list[str], bytes]]:
    """(keys, JSONL content) per input file: at most MAX_REQUESTS lines and MAX_BYTES each."""
    files, keys, lines, size = [], [], [], 0
    for row in rows:
        line = input_line(row) + b"\n"
        if keys and (len(keys) == MAX_REQUESTS or size + len(line) > MAX_BYTES):
            files.append((keys, b"".join(lines)))
            keys, lines, size = [], [], 0
        keys.append(row["key"])
        lines.append(line)
        size += len(line)
    if keys:
        files.append((keys, b"".join(lines)))
    return files


async def file_name(store: Store, content: bytes) -> str:
    """Numbered (a batch sent again with the same requests keeps the first one's record) and
    hashed (a file written twice because a kill came between writing and recording is one file)."""
    return f"memaudit-{await store.batches.count() + 1:04d}-{hashlib.sha256(content).hexdigest()[:12]}"


def endpoint_of(settings: Settings, role: str, *, model: str | None = None,
                sent_to: str | None = None) -> tuple[str, str | None]:
    """(base URL, API key) of a batched request of `role`: the role's endpoint, or that of the panel
    judge (a `[judges.NAME]` section) whose model is `model`, or, for a batch already sent, whose
    endpoint it was sent to (`sent_to`, as recorded: credentials redacted). A batch to send needs
    a server whose dialect has the Batch API."""
    found = [rc for rc in _configs(settings, role) if rc.base_urls and (model is None or rc.model == model)
             and (sent_to is None or redact_url(rc.base_urls[0]) == sent_to)]
    rc = found[0] if found else settings.role(role)
    if not rc.base_urls:
        raise BadInput(f"--batch needs an endpoint with the Batch API for role {role} (--base-url or a [roles] "
                       "section in --config); --batch-file DIR writes input files for vLLM's batch runner instead",
                       field="base_url")
    if sent_to is None and not DIALECTS[rc.backend].batch_api:
        raise BadInput(f"--batch: role {role} is served by a {rc.backend} server, which has no Batch API; "
                       "--batch-file DIR writes its input files for vLLM's batch runner instead",
                       field="backend")
    return rc.base_urls[0], rc.api_key


def _sent_to(settings: Settings, batch: dict) -> tuple[str, str | None]:
    return endpoint_of(settings, batch["role"], sent_to=batch["endpoint"])


def _configs(settings: Settings, role: str) -> list:
    """The role's config, then (the recovery judge) every panel judge with a section of its own."""
    if role != PANEL_ROLE:
        return [settings.role(role)]
    return [settings.role(role), *(settings.panel_judge(name).role(role) for name in settings.judge_sections)]


def groups(settings: Settings, rows: list, *, by_endpoint: bool) -> dict[tuple, list]:
    """The requests per input-file group: one model per file (the Batch API and vLLM's batch runner
    both take one), and with `by_endpoint` one endpoint and credentials per group."""
    out: dict = {}
    for row in rows:
        endpoint = endpoint_of(settings, row["role"], model=row["model"]) if by_endpoint else (None, None)
        out.setdefault((*endpoint, row["model"]), []).append(row)
    return out


async def submit(store: Store, settings: Settings, directory: Path | None = None) -> list[str]:
    """Send every request waiting to be sent; one line per batch or file made."""
    await store.flush()
    said = await recover(store, settings)
    queued = await store.batches.queued()
    for (base_url, api_key, _), rows in groups(settings, queued, by_endpoint=directory is None).items():
        if directory is not None:
            said += [await _write_file(store, directory, keys, content) for keys, content in split_files(rows)]
            continue
        async with BatchAPI(base_url, api_key, timeout=settings.timeout) as api:
            for keys, content in split_files(rows):
                said.append(await _send(store, api, rows[0]["role"], keys, content))
    return said


async def _write_file(store: Store, directory: Path, keys: list[str], content: bytes) -> str:
    """Write one input file (atomically: a kill leaves the whole file or none), then record it."""
    name = await file_name(store, content)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.jsonl"
    partial = path.with_suffix(".jsonl.partial")
    partial.write_bytes(content)
    partial.replace(path)
    first = await store.batches.request(keys[0])
    await store.write([store.batches.batch_statement(name=name, role=first["role"], endpoint=str(directory),
                                                     input_file=str(path), status="written", requests=len(keys),
                                                     created=_now()),
                       store.batches.assign_statement(name, keys)])
    return f"wrote {len(keys)} requests to {path}"


async def _send(store: Store, api: BatchAPI, role: str, keys: list[str], content: bytes) -> str:
    """Upload one input file and make it a batch, recording each id as soon as it exists."""
    name = await file_name(store, content)
    await store.write([store.batches.batch_statement(name=name, role=role, endpoint=api.shown,
                                                     input_file=None, status="uploading", requests=len(keys),
                                                     created=_now()),
                       store.batches.assign_statement(name, keys)])
    file_id = await api.upload(f"{name}.jsonl", content)
    await store.write([store.batches.update_statement(name, input_file=file_id)])
    return await _create(store, api, name, file_id, len(keys))


async def _create(store: Store, api: BatchAPI, name: str, file_id: str, n: int) -> str:
    batch = await api.create(file_id, BATCH_CHAT_URL)
    await store.write([store.batches.update_statement(name, batch_id=batch["id"], status=batch["status"])])
    return f"sent {n} requests as batch {batch['id']} ({batch['status']})"


async def recover(store: Store, settings: Settings) -> list[str]:
    """Finish what a killed submit left: an upload without a file id is dropped (its requests are
    sent again; at worst an unused file stays uploaded); a file without a batch id gets the batch
    the provider made from it, or a new one."""
    said = []
    for b in await store.batches.batches(open_only=True):
        if b["status"] != "uploading":
            continue
        if b["input_file"] is None:
            await store.write(store.batches.drop_statements(b["name"]))
            continue
        async with BatchAPI(*_sent_to(settings, b), timeout=settings.timeout) as api:
            found = await api.find(b["input_file"])
            if found is None:
                said.append(await _create(store, api, b["name"], b["input_file"], b["requests"]))
            else:
                await store.write([store.batches.update_statement(b["name"], batch_id=found["id"],
                                                                  status=found["status"])])
                said.append(f"found batch {found['id']} of an interrupted submit ({found['status']})")
    return said


async def refresh(store: Store, settings: Settings) -> None:
    """Ask the provider for the state and counts of every batch not collected yet."""
    for b in await store.batches.batches(open_only=True):
        if b["batch_id"] is None:
            continue
        async with BatchAPI(*_sent_to(settings, b), timeout=settings.timeout) as api:
            batch = await api.get(b["batch_id"])
        await store.write([store.batches.update_statement(b["name"], status=batch.get("status", "?"),
                                                          counts=batch.get("request_counts") or {})])


# -- collecting ------------------------------------------------------------------------------
@dataclass
class Tally:
    """What collecting did, per outcome."""
    results: int = 0       # answers stored in the cache
    failures: int = 0      # outcomes the live path records as failures, recorded the same way
    repairs: int = 0       # answers needing a repair attempt: it waits to be sent
    retry: int = 0         # no result (429, 5xx, expired, cancelled): sent again
    rejected: int = 0      # the endpoint refused the request's form: sent again once fixed
    skipped: int = 0       # lines already applied (a collect run again): their calls are in the cache
    unknown: int = 0       # custom_ids this store never sent (another store's output, a hand-made line)
    elsewhere: int = 0     # requests of this store that wait in another batch, or to be sent
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        parts = [f"{self.results} results", f"{self.failures} recorded failures", f"{self.repairs} repairs queued",
                 f"{self.retry} to send again"]
        if self.rejected:
            parts.append(f"{self.rejected} rejected ({self.problems[0]})")
        if self.skipped:
            parts.append(f"{self.skipped} already collected")
        if self.unknown:
            parts.append(f"{self.unknown} unknown custom_id(s) (not requests of this store; ignored)")
        if self.elsewhere:
            parts.append(f"{self.elsewhere} of requests not in this batch (ignored)")
        return ", ".join(parts)


@dataclass
class Collector:
    """Applies result lines to the pending requests, as the live path would have."""
    store: Store
    settings: Settings
    checks: dict[str, Callable | None]
    refusals: Refusals
    tally: Tally = field(default_factory=Tally)
    touched: set[str] = field(default_factory=set)  # batches whose requests got a line

    def __post_init__(self):
        self.secrets = configured_secrets(self.settings)  # a result line is an answer: cleaned as one

    async def apply_file(self, content: bytes, batch: str | None) -> None:
        """Apply every line of an output or error file; `batch` None accepts any sent request
        (an imported vLLM output file), else only requests of that batch. Every line is checked
        before any is applied: a damaged or truncated file stores nothing."""
        statements: list = []
        for line in result_lines(content):
            key = line["custom_id"]
            row = await self.store.batches.request(key)
            if row is None:
                known = await self.store.calls.get_call(key) is not None
                self.tally.skipped += known
                self.tally.unknown += not known
                continue
            if row["batch"] is None or (batch is not None and row["batch"] != batch):
                self.tally.elsewhere += 1
                continue
            self.touched.add(row["batch"])
            statements += await self.apply(row, line)
            if len(statements) >= COMMIT_EVERY:
                await self.store.write(statements)
                statements = []
        await self.store.write(statements)

    async def apply(self, row, line: dict) -> list:
        """The statements that record one result line's outcome for its request."""
        if await self.store.calls.get_call(row["key"]) is not None:  # answered meanwhile (a live run)
            self.tally.skipped += 1
            return [self.store.batches.done_statement(row["key"])]
        response = self.secrets.answer(line.get("response") or {})
        status, body = response.get("status_code"), response.get("body")
        if status == 200 and isinstance(body, dict):
            return self._answered(row, body)
        return await self._not_answered(row, status, body, line.get("error"))

    def _answered(self, row, response: dict) -> list:
        role, key = row["role"], row["key"]
        sent = orjson.loads(row["body"])
        first = orjson.loads(row["first_messages"]) if row["first_messages"] else sent["messages"]
        usage = orjson.loads(row["usage"])
        request = orjson.loads(row["request"])
        try:
            outcome = read_attempt(role, first, sent["messages"], response, request["schema"], self.checks.get(role),
                                   usage, request.get("tools"), request.get("params"))
        except Refusal as exc:
            return self._failed(row, exc)
        if outcome.problem is None:
            self.tally.results += 1
            self.store.calls.put_call(**ok_row(key, role, row["model"], row["request"], outcome.raw, usage, 0.0,
                                               outcome.tool_calls, outcome.choices))
            return [self.store.batches.done_statement(key)]
        attempt = row["attempt"] + 1
        if attempt > self.settings.repair_attempts:
            failed = InvalidOutput(role, outcome.raw, outcome.problem)
            failed.usage = usage  # the tokens of every attempt, as the live path records them
            return self._failed(row, failed)
        self.tally.repairs += 1
        seed = request["seed"] + attempt  # as the live path seeds a repair
        body = {**sent, "messages": outcome.next_messages, "seed": seed}
        return [self.store.batches.next_attempt_statement(key, attempt, _json(body), _json(first), _json(usage))]

    def _failed(self, row, exc: InvalidOutput | ContextOverflow) -> list:
        self.tally.failures += 1
        api_key = self.settings.role(row["role"]).api_key
        self.store.calls.put_call(**failure_row(row["key"], row["role"], row["model"], row["request"], exc,
                                                (api_key, *self.secrets.values)))
        return [self.store.batches.done_statement(row["key"])]

    async def _not_answered(self, row, status, body, error) -> list:
        if status is None:  # expired, cancelled, timed out inside the batch: no answer at all
            self.tally.retry += 1
            code = (error or {}).get("code") if isinstance(error, dict) else error
            return [self.store.batches.requeue_statement(row["key"], f"not answered: {code or 'no response'}")]
        data = orjson.dumps(body if body is not None else {"error": {"message": str(error or "")}})
        verdict = answer_error(status, data, row["role"], "the batch endpoint")
        if verdict is None:
            self.tally.retry += 1
            return [self.store.batches.requeue_statement(row["key"], f"HTTP {status}: retryable")]
        if isinstance(verdict, (ContextOverflow, InvalidOutput)):
            return self._failed(row, verdict)
        if isinstance(verdict, ParameterRefused):  # asked again without it, under its new key
            request = orjson.loads(row["request"])
            await self.refusals.learn(request["model"], request["backend"], verdict.param)
            self.tally.retry += 1
            return [self.store.batches.done_statement(row["key"])]
        assert isinstance(verdict, EndpointError)
        self.tally.rejected += 1
        self.tally.problems.append(verdict.message[:200])
        return [self.store.batches.requeue_statement(row["key"], f"rejected: {verdict.message[:200]}")]


def result_lines(content: bytes) -> list[dict]:
    """The result lines of an output or error file, each checked for the fields collecting reads,
    once per custom_id (an identical repeat is dropped, a conflicting one refused). Any problem
    refuses the whole file in one line naming the line: nothing of it is stored."""
    lines: dict[str, dict] = {}
    for number, raw in enumerate(content.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise BadInput(f"line {number} is not JSON (a truncated or damaged file?); nothing was stored",
                           field="custom_id") from None
        problem = _line_problem(line)
        if problem:
            raise BadInput(f"line {number}: {problem}; nothing was stored", field="custom_id")
        key = line["custom_id"]
        if key in lines and lines[key] != line:
            raise BadInput(f"line {number}: custom_id {key} appears twice with different results; nothing was stored",
                           field="custom_id")
        lines[key] = line
    return list(lines.values())


def _line_problem(line) -> str | None:
    """What makes a line no batch result line (a vLLM runner's or the Batch API's), or None."""
    if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str) or not line["custom_id"]:
        return "not a batch output line (JSON with custom_id)"
    response = line.get("response")
    if response is None:
        return None  # no answer (expired, cancelled): sent again
    if not isinstance(response, dict):
        return f"response must be an object, got {type(response).__name__}"
    status = response.get("status_code")
    if status is not None and (isinstance(status, bool) or not isinstance(status, int)):
        return f"status_code must be a whole number, got {status!r}"
    if status == 200 and not isinstance(response.get("body"), dict):
        return "status_code 200 without a response body object"
    return None


async def collect(collector: Collector) -> list[str]:
    """Collect every finished batch not collected yet; one line per batch looked at."""
    store, said = collector.store, []
    for b in await store.batches.batches(open_only=True):
        if b["batch_id"] is None:
            if b["status"] == "written":
                said.append(f"{b['name']}: written to {b['input_file']}: run `{FILE_RUNNER}` on it, then "
                            "`memaudit batch collect --from OUTPUT`")
            else:
                said.append(f"{b['name']}: its submit was interrupted: `memaudit batch resubmit` finishes it")
            continue
        said.append(await _collect_batch(collector, b))
    return said


async def _collect_batch(collector: Collector, b: dict) -> str:
    store = collector.store
    collector.tally = Tally()
    async with BatchAPI(*_sent_to(collector.settings, b), timeout=collector.settings.timeout) as api:
        batch = await api.get(b["batch_id"])
        status, counts = batch.get("status", "?"), batch.get("request_counts") or {}
        await store.write([store.batches.update_statement(b["name"], status=status, counts=counts)])
        if status not in TERMINAL:
            return f"{b['batch_id']}: {status}, {counts.get('completed', 0)} of {counts.get('total', '?')} done"
        for file_id in (batch.get("output_file_id"), batch.get("error_file_id")):
            if file_id:
                await collector.apply_file(await api.content(file_id), b["name"])
    await _close(store, b["name"], f"not answered: batch {status}", collector.tally)
    errors = (batch.get("errors") or {}).get("data") or []
    why = f" ({errors[0].get('message', '')[:200]})" if errors else ""
    return f"{b['batch_id']}: {status}{why}: {collector.tally.line()}"


async def _close(store: Store, name: str, note: str, tally: Tally) -> None:
    """A batch's files are applied: what it left unanswered waits to be sent again."""
    left = await store.batches.in_batch(name)
    tally.retry += len(left)
    await store.write([*(store.batches.requeue_statement(r["key"], note) for r in left),
                       store.batches.update_statement(name, collected=1)])


async def import_output(collector: Collector, path: Path) -> str:
    """Apply a vLLM batch runner's output file; a written file all of whose requests are answered
    is closed, and any of its requests the output lacks wait to be sent again."""
    await collector.apply_file(read_regular(path, limit=MAX_OUTPUT_BYTES), None)
    store = collector.store
    for b in await store.batches.batches(open_only=True):
        if b["name"] in collector.touched:
            await _close(store, b["name"], f"not in the output file {path.name}", collector.tally)
    return f"{path}: {collector.tally.line()}"
