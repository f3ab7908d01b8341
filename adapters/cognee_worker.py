"""The cognee worker: one cognee instance (one user's), in cognee's own environment, driven by
the `cognee` adapter (adapters/cognee.py) over stdin/stdout. cognee does not install beside
memaudit's other libraries, so this file imports nothing of memaudit but its stdlib-only logical
clock (adapters/library_clock.py, found beside this file); its model and embedding calls go over
HTTP to memaudit's recording proxy.

Protocol: the first line on stdin is the set-up, then one request a line; each gets one answer
line on stdout, `{"ok": true, "result": …}` or `{"ok": false, "error": "Type: message"}`.

    {"base_url", "model", "embed_model", "dimensions", "scope", "tiktoken_cache", "telemetry"}
                                                                                    -> {"version"}
    {"op": "add", "text", "clock": [clock, task_index, turn]}                       -> null
    {"op": "search", "query", "k"}                                                  -> [{"id", "content", "score", …}]
    {"op": "dump"}                                                                  -> [{"id", "content", "category", …}]
    {"op": "clock"} -> {"uuids", "last"};  {"op": "set_clock", "state"} -> null

Anything cognee prints goes to stderr (the adapter keeps it in a log file)."""
from __future__ import annotations

import asyncio
import importlib
import json
import os
import sys
import tempfile

from library_clock import LibraryClock, patch_modules

# Run by path, this file's folder leads sys.path, where the adapter's own `cognee.py` would shadow
# the library: import only the clock from it.
sys.path.remove(os.path.dirname(os.path.abspath(__file__)))

DATASET = "memaudit"
PROXY_KEY = "memaudit-proxy"
# A model name litellm knows to take `json_schema` structured output: cognee asks for a JSON
# schema only for such names, else falls back to free text. The proxy sends the request to the
# model configured for the memory role whatever name the library puts in it.
SCHEMA_MODEL = "openai/gpt-4o-mini"
# The client of its structured-output calls under this configuration (its default framework,
# litellm_native). cognee imports it on first use; imported at set-up, its retries lose their waits.
LLM_CLIENT = "cognee.infrastructure.llm.structured_output_framework.litellm_native.native_adapter"


def configure(setup: dict, root: str) -> None:
    """cognee's embedded defaults (SQLite, LanceDB, its Kuzu graph) and its log files in this
    worker's own folder (not the user's home, where it also prunes older logs), its LLM and
    embeddings on the proxy, no telemetry, nothing fetched from a hub."""
    os.environ.update({
        **setup["telemetry"], "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
        "LLM_PROVIDER": "openai", "LLM_ENDPOINT": setup["base_url"], "LLM_MODEL": SCHEMA_MODEL,
        "LLM_API_KEY": PROXY_KEY,
        # Its `openai` embedding provider refuses `dimensions`; `openai_compatible` takes them.
        "EMBEDDING_PROVIDER": "openai_compatible", "EMBEDDING_ENDPOINT": setup["base_url"],
        "EMBEDDING_MODEL": setup["embed_model"], "EMBEDDING_DIMENSIONS": str(setup["dimensions"]),
        "EMBEDDING_API_KEY": PROXY_KEY,
        "DATA_ROOT_DIRECTORY": os.path.join(root, "data"), "SYSTEM_ROOT_DIRECTORY": os.path.join(root, "system"),
        "COGNEE_LOGS_DIR": os.path.join(root, "logs"),
    })
    if setup.get("tiktoken_cache"):  # its token counter's encoding, from a local copy
        os.environ["TIKTOKEN_CACHE_DIR"] = setup["tiktoken_cache"]


def without_waiting(cognee_modules) -> None:
    """cognee retries a failed structured-output call for at least 240 s with exponential waits.
    Under memaudit an identical request is answered from the call cache with the same outcome, so
    the waits only stall the run: keep its attempts, drop the waits and the time floor. Only the
    retries under that policy (its other retries, some bounded by time alone, keep their waits)."""
    import tenacity
    from cognee.infrastructure.llm import retry_config

    policy = retry_config.llm_retry_stop_condition
    for stop in getattr(policy, "stops", ()):
        if isinstance(stop, tenacity.stop_after_delay):
            stop.max_delay = 0
    dropped = 0
    for module in cognee_modules:
        for value in list(vars(module).values()):
            for candidate in (value, *vars(value).values()) if isinstance(value, type) else (value,):
                retrying = getattr(candidate, "retry", None)
                if isinstance(retrying, tenacity.BaseRetrying) and retrying.stop is policy:
                    retrying.wait = tenacity.wait_none()
                    dropped += 1
    if not dropped:
        raise RuntimeError(f"no retry of cognee's structured-output calls found (in {LLM_CLIENT}?)")


class Worker:
    def __init__(self, cognee, clock: LibraryClock):
        self.cognee, self.clock = cognee, clock
        self.added = False  # whether a message was given yet

    async def add(self, text: str, clock: list) -> None:
        # cognee reads the time a varying number of times (its background tasks poll it): the
        # readings restart at each message's own moment, so what it stores does not depend on how
        # often it read the time before.
        self.clock.last, self.clock.ticks = tuple(clock), 0
        self.added = True
        before = asyncio.all_tasks()
        try:
            with self.clock.running():
                await self.cognee.add(text, dataset_name=DATASET)
                runs = await self.cognee.cognify(datasets=[DATASET])
        finally:
            await self.settled(before)
        failed = [str(run) for run in (runs or {}).values() if "Errored" in type(run).__name__]
        if failed:
            raise RuntimeError(f"cognify failed: {failed[0][:300]}")

    async def settled(self, before: set) -> None:
        """Wait for the tasks cognee started for this message. When one step fails, cognee's
        asyncio.gather leaves the other running (its chunk summary, beside a failed graph
        extraction): it would make its model calls after the write is over, counted with whatever
        the adapter does next. (litellm's logging worker, started on first use, runs for good.)"""
        library = os.path.dirname(self.cognee.__file__)
        while running := [task for task in asyncio.all_tasks() - before if runs_code_of(task, library)]:
            await asyncio.wait(running)

    async def search(self, query: str, k: int) -> list[dict]:
        if not self.added:  # cognee refuses to search a dataset it has never been given
            return []
        self.clock.ticks = 0
        with self.clock.running():
            found = await self.cognee.search(query_text=query, query_type=self.cognee.SearchType.CHUNKS,
                                             datasets=[DATASET], top_k=k)
        return [jsonable(item) for item in found]

    async def dump(self) -> list[dict]:
        from cognee.infrastructure.databases.graph import get_graph_engine

        nodes, _ = await (await get_graph_engine()).get_graph_data()
        # `raw_data_location` is a file path in this worker's scratch folder, not memory content.
        return [{"id": str(node_id), **jsonable({k: v for k, v in properties.items() if k != "raw_data_location"})}
                for node_id, properties in nodes]


def runs_code_of(task: asyncio.Task, folder: str) -> bool:
    """Whether the task is unfinished and runs a coroutine defined under `folder`."""
    code = getattr(task.get_coro(), "cr_code", None)
    return not task.done() and code is not None and code.co_filename.startswith(folder)


def jsonable(value):
    return json.loads(json.dumps(value, default=str))


async def serve(protocol) -> None:
    loop = asyncio.get_running_loop()
    setup = json.loads(await loop.run_in_executor(None, sys.stdin.readline))
    with tempfile.TemporaryDirectory(prefix="memaudit-cognee-") as root:
        configure(setup, root)
        import cognee

        importlib.import_module(LLM_CLIENT)
        clock = LibraryClock(setup["scope"])
        patch_modules("cognee")
        without_waiting([m for name, m in list(sys.modules.items()) if m is not None and name.startswith("cognee")])
        worker = Worker(cognee, clock)
        answer(protocol, {"ok": True, "result": {"version": cognee.__version__}})
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            answer(protocol, await handle(worker, json.loads(line)))


async def handle(worker: Worker, request: dict) -> dict:
    try:
        op = request["op"]
        if op == "add":
            result = await worker.add(request["text"], request["clock"])
        elif op == "search":
            result = await worker.search(request["query"], request["k"])
        elif op == "dump":
            result = await worker.dump()
        elif op == "clock":  # the ids drawn so far and the latest moment (the time readings restart per message)
            result = {"uuids": worker.clock.uuids, "last": list(worker.clock.last)}
        elif op == "set_clock":
            worker.clock.uuids, worker.clock.last = request["state"]["uuids"], tuple(request["state"]["last"])
            result = None
        else:
            raise ValueError(f"unknown request {op!r}")
        return {"ok": True, "result": result}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def answer(protocol, message: dict) -> None:
    protocol.write(json.dumps(message) + "\n")
    protocol.flush()


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever cognee prints goes to stderr, never into the protocol
    asyncio.run(serve(protocol))


if __name__ == "__main__":
    main()
