"""The adapter contract: what every memory system must do, checked the same way for memaudit's own
systems (tests/adapters/) and for any other (`memaudit check-adapter NAME`), against the scripted
fake model, with a fast deterministic encoder instead of the sentence model.

    writes      observe() takes a scripted conversation; dump() is a list of items with str content
    reads       search(q, k) returns at most k MemoryItems, scores descending (or all None);
                context() returns an AgentContext; footprint() counts what dump() lists
    state       snapshot() is JSON, restore() of it gives the same dump, snapshot and searches, and
                the same future behaviour; the snapshot is a copy
    determinism two fresh adapters fed the same conversation end with the same dump and snapshot

Types are checked at the boundary (memaudit/adapters/boundary.py): a wrong one fails the check
with the one line a rollout would print."""
from __future__ import annotations

import functools
import hashlib
import re
import sys
import tempfile
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from memaudit.adapters.base import AdapterContext, AgentContext, Event
from memaudit.adapters.boundary import open_adapter
from memaudit.adapters.deployed import DeployedLibrary
from memaudit.adapters.registry import get_adapter, registrations
from memaudit.config import Settings
from memaudit.errors import MemauditError
from memaudit.llm.embed import DIM, Embedder
from memaudit.testing.fake_openai import FakeOpenAI, schema_name

QUERIES = ["knee injury from running", "how does the user like answers", "Python data analysis", "Munich"]


def hash_encoder(texts: list[str]) -> np.ndarray:
    """Hashed bag of words, normalised: texts sharing words are near, like a real embedding."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in re.findall(r"\w+", text.lower()):
            out[row, int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % DIM] += 1.0
        norm = np.linalg.norm(out[row])
        if norm:
            out[row] /= norm
        else:
            out[row, 0] = 1.0
    return out


EPISODES = [
    ("Help me plan a 10k training schedule; I ran a half marathon last spring and hurt my knee.",
     [("Here is a four-week plan with three runs a week.", "I prefer short answers. I work night shifts as a nurse."),
      ("A shorter plan: run Monday, Wednesday and Saturday mornings.", "Thanks, that works for me.")]),
    ("Can you explain how Python decorators work? I use Python for data analysis at the hospital.",
     [("A decorator wraps a function to extend its behaviour.", "Show me an example with timing, please.")]),
    ("Suggest a weekend hiking trip near Munich; I moved there from Berlin this year.",
     [("Try the Herzogstand ridge walk, about five hours.", "Great, I love ridge walks with views.")]),
]


def events(episodes=EPISODES, first_index: int = 1):
    """The event sequence the rollout scaffold produces for these episodes."""
    for offset, (task, turns) in enumerate(episodes):
        index = first_index + offset
        yield Event("task_start", task, index, 0)
        for turn, (reply, user) in enumerate(turns, 1):
            yield Event("assistant", reply, index, turn)
            yield Event("user", user, index, turn)
        yield Event("episode_end", "", index, len(turns))


async def play(adapter, episodes=EPISODES, first_index: int = 1) -> None:
    for event in events(episodes, first_index):
        await adapter.observe(event)


def add_every_fact(body):
    """mem0's decision call: ADD each new fact (so the store grows deterministically)."""
    facts = body["messages"][-1]["content"].split("New facts:\n", 1)[1].splitlines()
    return {"decisions": [{"fact": n, "event": "ADD", "id": "", "text": line.split(". ", 1)[1]}
                          for n, line in enumerate(facts)]}


def memt_search_facts_once(body):
    """memt's ReAct policy: search the facts with the question itself, then finish."""
    prompt = body["messages"][-1]["content"]
    question = prompt.split("Question:\n", 1)[1].split("\n\nSteps so far:", 1)[0]
    if "Steps so far:\n(none yet)" in prompt:
        return {"thought": "look it up", "action": "search_facts", "query": question}
    return {"thought": "enough", "action": "finish", "query": ""}


def memt_fact_of_each_turn(body):
    """memt's formation policy: one fact, the turn's words, and a summary."""
    turn = body["messages"][-1]["content"].rsplit("Current turn:\n", 1)[1].removeprefix("user said: ")
    return {"tool_calls": [{"tool": "create_fact", "name": "", "content": turn},
                           {"tool": "update_summary", "name": "", "content": f"Latest: {turn}"}]}


def imported_libraries() -> list[type]:
    """The adapter classes of the deployed libraries whose module is imported: the only ones whose
    library can be calling the fake."""
    found = []
    for registration in registrations():
        module, _, attr = registration.target.partition(":")
        adapter = getattr(sys.modules.get(module), attr, None)
        if isinstance(adapter, type) and issubclass(adapter, DeployedLibrary):
            found.append(adapter)
    return found


def library_answer(body: dict) -> object | None:
    """A deployed library's own fake answer to a structured call of its role (`fake_answer`)."""
    name = schema_name(body)
    for adapter in imported_libraries():
        if name == re.sub(r"[^A-Za-z0-9_-]", "_", adapter.ROLE):  # a role's schema name (llm/dialects/base.py)
            return adapter.fake_answer(body)
    return None


def library_text(default):
    """Free-text calls: a deployed library's own fake answer (`fake_text`), else `default`."""
    def answer(body):
        for adapter in imported_libraries():
            if (text := adapter.fake_text(body)) is not None:
                return text
        return default(body)
    return answer


def library_json(body: dict) -> object | None:
    """Bare `json_object` calls: a deployed library's own fake answer (`fake_json`), else None (the
    fake's free-text answer, `library_text`'s for a library that answers its JSON prompts there)."""
    for adapter in imported_libraries():
        if (answer := adapter.fake_json(body)) is not None:
            return answer
    return None


def mem0ai_requests(fake) -> list[dict]:
    """The mem0ai library's extraction requests the fake was sent (the ones its fake answers)."""
    from memaudit.adapters.mem0ai import Mem0AI
    return [body for body in fake.requests if Mem0AI.fake_json(body) is not None]


def library_tool_calls(request, messages: list[dict]) -> list[tuple[str, dict]] | None:
    """A deployed library's own fake tool calls (`fake_tool_calls`), else None (the fake's choice)."""
    for adapter in imported_libraries():
        if (calls := adapter.fake_tool_calls(request, messages)) is not None:
            return calls
    return None


def any_library_json(body: dict) -> object | None:
    """`library_json`, every installed deployed library's adapter imported first (once), as for
    `any_library_tool_calls`."""
    import_every_adapter()
    return library_json(body)


def any_library_tool_calls(request, messages: list[dict]) -> list[tuple[str, dict]] | None:
    """`library_tool_calls`, every installed deployed library's adapter imported first (once): a fake
    that serves a CLI in another process, where the library runs, has imported none of them."""
    import_every_adapter()
    return library_tool_calls(request, messages)


def any_library_json_text(default):
    """`library_text` for a fake serving a CLI in another process: a free-text request that asks for
    JSON (as a library's JSON-mode prompt does) first imports every installed deployed library's
    adapter (once); other free text (the assistant's replies) is `default`'s at once."""
    answer = library_text(default)

    def text(body):
        if "json" not in str(body.get("messages")).lower():
            return default(body)
        import_every_adapter()
        return answer(body)
    return text


@functools.cache
def import_every_adapter() -> None:
    for registration in registrations():
        try:
            get_adapter(registration.name)
        except MemauditError:  # a library that is not installed: its calls cannot come
            pass


def script(fake):
    """Memory-side answers that make every system write; other roles keep the fake's defaults."""
    fake.on("memory_mem0_extract", lambda body: {"facts": [body["messages"][-1]["content"].rsplit("\n", 1)[-1]]})
    fake.on("memory_mem0_decide", add_every_fact)
    fake.on("memt_policy_formation", memt_fact_of_each_turn)
    fake.on("memt_policy_update", lambda body: {"operations": [{"op": "add", "target": -1, "content": ""}]})
    fake.on("memt_policy_search", memt_search_facts_once)
    fake.fallback = library_answer
    fake.on_text(library_text(fake.text_handler))
    fake.on_json_object(library_json)
    fake.tool_chooser = library_tool_calls
    return fake


@asynccontextmanager
async def contract_runtime(system: str, fake: FakeOpenAI, folder: Path, log_dir: Path):
    """A factory of fresh `system` adapters (one scope, one embedder) on the fake model, with a
    throw-away store under `folder`; adapter tracebacks are logged under `log_dir`."""
    from memaudit.runtime import open_runtime  # the runtime pulls in the model client: only when used

    settings = Settings(db=folder / "contract.db", base_url="http://fake.invalid/v1", model="fake", backend="openai",
                        backoff_base=0.001, backoff_cap=0.01)
    embedder = Embedder(None, encoder=hash_encoder)
    async with open_runtime(settings, transport=fake.transport(), embedder=embedder) as rt:
        def make():
            return open_adapter(system, AdapterContext(rt.llm, rt.embedder, scope="contract/u1"), log_dir)
        yield make


@dataclass
class Check:
    name: str
    problem: str | None  # None: passed


async def check_adapter(system: str, log_dir: Path) -> list[Check]:
    """Every contract check of `system`, each passed or with its problem (adapter faults are
    logged under `log_dir`)."""
    results = []
    with tempfile.TemporaryDirectory(prefix="memaudit-contract-") as scratch:
        for name, check in CHECKS:
            async with contract_runtime(system, script(FakeOpenAI()), Path(scratch), log_dir) as make:
                try:
                    await check(make)
                    results.append(Check(name, None))
                except (MemauditError, ContractBroken) as exc:
                    results.append(Check(name, str(exc)))
    return results


class ContractBroken(Exception):
    """A contract check found behaviour the protocol rules out."""


def expect(condition: bool, problem: str) -> None:
    if not condition:
        raise ContractBroken(problem)


async def writes_and_reads(make) -> None:
    adapter = make()
    await play(adapter)
    dump = adapter.dump()
    expect(adapter.footprint()[0] == len(dump), "footprint() counts other items than dump() lists")
    if not adapter.supports_retrieve:
        return
    for query in QUERIES:
        for k in (1, 3, 5):
            scores = [item.score for item in await adapter.search(query, k)]
            expect(scores == [None] * len(scores) or (None not in scores and scores == sorted(scores, reverse=True)),
                   f"search({query!r}, {k}) scores are neither descending nor all None: {scores}")
    expect(isinstance(await adapter.context("what should I eat before a run?", 5), AgentContext),
           "context() did not return an AgentContext")


async def round_trip(make) -> None:
    original = make()
    await play(original, EPISODES[:2])
    state = original.snapshot()
    restored = make()
    await restored.restore(state)
    expect(restored.dump() == original.dump(), "restore(snapshot()) gives another dump()")
    expect(restored.snapshot() == state, "restore(snapshot()) gives another snapshot()")
    if original.supports_retrieve:
        for query in QUERIES:
            expect(await restored.search(query, 5) == await original.search(query, 5),
                   f"after restore, search({query!r}, 5) differs")
    await play(original, EPISODES[2:], first_index=3)
    await play(restored, EPISODES[2:], first_index=3)
    expect(restored.dump() == original.dump() and restored.snapshot() == original.snapshot(),
           "after restore, the same events lead to another store (ids, counters or decisions differ)")
    expect(state != original.snapshot() or not original.dump(), "snapshot() is not a copy: later writes changed it")


async def deterministic(make) -> None:
    first, second = make(), make()
    await play(first)
    await play(second)
    expect(first.dump() == second.dump() and first.snapshot() == second.snapshot(),
           "the same conversation gives two different stores (wall time, uuid4 or unordered iteration?)")


CHECKS = [("writes and reads", writes_and_reads), ("snapshot/restore round trip", round_trip),
          ("deterministic", deterministic)]

