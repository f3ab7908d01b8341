"""The mem0_graph worker: one mem0 instance in graph mode (one user's), in mem0ai 1.0.x's own
environment, driven by the `mem0_graph` adapter (adapters/mem0_graph.py) over stdin/stdout. mem0's
graph mode is gone from mem0ai 2.x (mem0ai/mem0#4811), and 1.0.x does not install beside the
core's mem0ai 2.x, so this file imports nothing of memaudit but its stdlib-only logical clock
(adapters/library_clock.py, found beside this file); its model and embedding calls go over HTTP to
memaudit's recording proxy.

Protocol: the first line on stdin is the set-up, then one request a line; each gets one answer
line on stdout, `{"ok": true, "result": …}` or `{"ok": false, "error": "Type: message"}`.

    {"base_url", "model", "embed_model", "dimensions", "scope"}              -> {"version"}
    {"op": "add", "text", "clock": [clock, task_index, turn]}                -> {"problems": [str]}
    {"op": "search", "query", "k"}                                           -> {"results", "relations"}
    {"op": "dump"}                                                           -> {"results", "relations"}
    {"op": "clock"} -> {"ticks", "uuids", "last"};  {"op": "set_clock", "state"} -> null

`problems` are the failures mem0 logged and went on from (an answer it could not parse, a failed
call of its vector path): each a lost write, which the adapter counts. Anything mem0 prints goes to
stderr (the adapter keeps it in a log file)."""
from __future__ import annotations

import concurrent.futures
import contextvars
import json
import logging
import os
import sys
import tempfile

from library_clock import LibraryClock, patch_modules

# Run by path, this file's folder leads sys.path, where memaudit's own `mem0.py` adapter would
# shadow the library: import only the clock from it.
sys.path.remove(os.path.dirname(os.path.abspath(__file__)))

USER = "user"
PROXY_KEY = "memaudit-proxy"
LOGGER = "mem0"


class ContextThreads(concurrent.futures.ThreadPoolExecutor):
    """mem0 runs a write's vector path and graph path in two pool threads, which would not see the
    running clock (a pool thread does not copy the caller's context): they run in it here."""

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)


class LoggedProblems(logging.Handler):
    """The errors mem0 logs and goes on from, kept for the write that is running."""

    def __init__(self):
        super().__init__(logging.ERROR)
        self.found: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.found.append(record.getMessage()[:300])


def configuration(setup: dict) -> dict:
    """mem0's graph mode as its documentation configures it with embedded stores: its OpenAI LLM
    and embedder at the proxy, an in-memory Qdrant, Kuzu in memory (its default), its history in
    an in-memory SQLite."""
    from qdrant_client import QdrantClient

    return {
        "llm": {"provider": "openai", "config": {"model": setup["model"], "api_key": PROXY_KEY,
                                                 "openai_base_url": setup["base_url"]}},
        "embedder": {"provider": "openai", "config": {"model": setup["embed_model"], "api_key": PROXY_KEY,
                                                      "openai_base_url": setup["base_url"],
                                                      "embedding_dims": setup["dimensions"]}},
        "vector_store": {"provider": "qdrant", "config": {"collection_name": "mem0", "client": QdrantClient(":memory:"),
                                                          "embedding_model_dims": setup["dimensions"]}},
        "graph_store": {"provider": "kuzu", "config": {"db": ":memory:"}},
        "history_db_path": ":memory:",
    }


class Worker:
    def __init__(self, memory, clock: LibraryClock, problems: LoggedProblems):
        self.memory, self.clock, self.problems = memory, clock, problems

    def add(self, text: str, clock: list) -> dict:
        self.clock.last = tuple(clock)
        self.problems.found = []
        with self.clock.running():
            self.memory.add([{"role": "user", "content": text}], user_id=USER)
        return {"problems": self.problems.found}

    def search(self, query: str, k: int) -> dict:
        with self.clock.running():
            return jsonable(self.memory.search(query, user_id=USER, limit=k))

    def dump(self) -> dict:
        return jsonable(self.memory.get_all(user_id=USER, limit=1_000_000))


def jsonable(value):
    return json.loads(json.dumps(value, default=str))


def handle(worker: Worker, request: dict) -> dict:
    try:
        op = request["op"]
        if op == "add":
            result = worker.add(request["text"], request["clock"])
        elif op == "search":
            result = worker.search(request["query"], request["k"])
        elif op == "dump":
            result = worker.dump()
        elif op == "clock":
            result = worker.clock.to_state()
        elif op == "set_clock":
            result = worker.clock.load_state(request["state"])
        else:
            raise ValueError(f"unknown request {op!r}")
        return {"ok": True, "result": result}
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def serve(protocol) -> None:
    setup = json.loads(sys.stdin.readline())
    os.environ["MEM0_TELEMETRY"] = "False"
    with tempfile.TemporaryDirectory(prefix="memaudit-mem0-graph-") as root:
        os.environ["MEM0_DIR"] = root  # its own files (a user id, a history database) in this worker's folder
        import mem0
        from mem0 import Memory

        problems = LoggedProblems()
        logger = logging.getLogger(LOGGER)
        logger.addHandler(problems)
        logger.propagate = False  # its log lines go nowhere but the count
        concurrent.futures.ThreadPoolExecutor = ContextThreads
        clock = LibraryClock(setup["scope"])
        patch_modules("mem0")
        worker = Worker(Memory.from_config(configuration(setup)), clock, problems)
        answer(protocol, {"ok": True, "result": {"version": mem0.__version__}})
        while line := sys.stdin.readline():
            answer(protocol, handle(worker, json.loads(line)))


def answer(protocol, message: dict) -> None:
    protocol.write(json.dumps(message) + "\n")
    protocol.flush()


def main() -> None:
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # whatever mem0 prints goes to stderr, never into the protocol
    serve(protocol)


if __name__ == "__main__":
    main()
