"""The rollout half of the published pack: with `--prompts PACK` the assistant (per system), the
simulated user and the preference judge send exactly the requests the published code sends. The
reference is the stand-in checkout's own code (tests/rollout/stand_in_rollout.py, our words),
executed on the same episode with the same model answers; memaudit reads that code with `ast` only."""
from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from memaudit.adapters.base import AdapterContext, MemoryAdapter
from memaudit.published.pack import import_published
from memaudit.rollout.episode import run_episode
from memaudit.types import CATEGORIES, MemoryItem
from tests.scoring.stand_in import write_stand_in

pytestmark = pytest.mark.anyio

# What each published agent class is called in its file, and what its memory returns.
AGENT_CLASS = {"amem": ("agents/agent.py", "AMemAgent"), "mem0": ("agents/agent_mem0.py", "Mem0Agent"),
               "memt": ("agents/agent_memt.py", "MemTAgent"), "nomem": ("agents/agent_nomem.py", "NoMemoryAgent")}
NOTES = [MemoryItem("m1", "Prefers tea — not coffee ☕", None, {"tags": ["drinks", "morning"]}),
         MemoryItem("m2", "Runs on Sundays", None, {"tags": []})]
ANSWERS = ["followup", "too_deep", "satisfied"]


@pytest.fixture
def pack(tmp_path):
    src = write_stand_in(tmp_path / "checkout")
    import_published(src, tmp_path / "pack")
    return src, tmp_path / "pack"


class Fixed(MemoryAdapter):
    """A memory that always shows the same notes (none for nomem), under a published system's name."""

    def __init__(self, ctx, name):
        super().__init__(ctx)
        self.name = name

    async def observe(self, event):
        return None

    async def search(self, query, k):
        return [] if self.name == "nomem" else list(NOTES)

    def dump(self):
        return []

    def snapshot(self):
        return {}

    async def restore(self, state):
        return None


def script(fake):
    """Model answers that depend only on how many calls of the role came before."""
    counts = {"agent": 0, "simulator": 0}

    def agent(body):
        counts["agent"] += 1
        return f"assistant reply {counts['agent']} — with “quotes”"

    def simulator(body):
        counts["simulator"] += 1
        answer = ANSWERS[min(counts["simulator"], len(ANSWERS)) - 1]
        return {"feedback_type": answer, "text": f"user says {counts['simulator']} ü"}
    fake.on_text(agent)
    fake.on("simulator", simulator)


def sent(fake) -> dict[str, list]:
    out = {"agent": [], "simulator": [], "pref_judge": []}
    for body in fake.requests:
        if "messages" not in body:
            continue
        name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name") or "agent"
        out[name].append(body["messages"])
    return out


def published(src, system: str, user, task) -> dict[str, list]:
    """The requests the stand-in's own code makes for this episode, with the same answers."""
    calls = {"agent": [], "simulator": [], "pref_judge": []}
    bank = {c: [{"dimension": e.dimension, "short": e.short, "explanation": e.explanation}
                for e in user.entries(c)] for c in CATEGORIES}
    turn = {"n": 0}

    def get_completion(messages, temperature):
        if "feedback_type" in messages[0]["content"]:
            calls["simulator"].append(messages)
            n = len(calls["simulator"])
            return json.dumps({"feedback_type": ANSWERS[n - 1], "text": f"user says {n} ü"})
        calls["pref_judge"].append(messages)
        return "{}"

    def llm(messages):
        calls["agent"].append(messages)
        turn["n"] += 1
        return f"assistant reply {turn['n']} — with “quotes”"

    scope = {"load_user": lambda uid: {"base_profile": user.persona, "memory_bank": bank},
             "get_completion": get_completion, "__name__": "stand_in"}
    exec(compile((src / "simulation.py").read_text(), "simulation.py", "exec"), scope)  # our own stand-in
    file, cls = AGENT_CLASS[system]
    exec(compile((src / file).read_text(), file, "exec"), scope)
    agent = scope[cls].__new__(scope[cls])
    shown = [{"content": n.content, "memory": n.content, "tags": n.fields["tags"]} for n in NOTES]
    agent.memory = SimpleNamespace(search=lambda query, **kw: shown, retrieve=lambda q: {"observations": shown})
    agent.retrieve_k = 5
    agent._call_llm = agent._call_reply_llm = llm
    scope["Episode"](user.id, task.text, 5).run(agent)
    return calls


@pytest.mark.parametrize("system", ["amem", "mem0", "memt", "nomem"])
async def test_an_episode_sends_the_published_requests_byte_for_byte(pack, open_rt, fake, settings, bench, system):
    src, pack_dir = pack
    script(fake)
    user, task = bench.users[0], bench.tasks["user_001"][0]
    async with open_rt(replace(settings, prompts_dir=pack_dir)) as rt:
        adapter = Fixed(AdapterContext(rt.llm, rt.embedder, scope="run/user_001"), system)
        episode = await run_episode(rt.llm, adapter, user, task, run="run", max_turns=5, k=5)
    assert episode.end_reason == "satisfied" and len(episode.turns) == 3
    expected = published(src, system, user, task)
    assert [len(calls) for calls in expected.values()] == [3, 3, 3]
    assert sent(fake) == expected


async def test_without_the_pack_the_requests_are_memaudits_own(open_rt, fake, bench):
    script(fake)
    user, task = bench.users[0], bench.tasks["user_001"][0]
    async with open_rt() as rt:
        adapter = Fixed(AdapterContext(rt.llm, rt.embedder, scope="run/user_001"), "amem")
        await run_episode(rt.llm, adapter, user, task, run="run", max_turns=5, k=5)
    requests = sent(fake)
    assert "STAND-IN" not in json.dumps(requests)
    assert "ratings" in json.dumps([b.get("response_format") for b in fake.requests if "messages" in b])


def test_a_rollout_function_of_another_shape_is_one_line(tmp_path):
    from memaudit.errors import BadInput
    src = write_stand_in(tmp_path / "checkout")
    path = src / "simulation.py"
    path.write_text(path.read_text().replace('f"Rate all {len(prefs)} wishes."', 'f"Rate all {prefs!r}."'))
    with pytest.raises(BadInput) as caught:
        import_published(src, tmp_path / "pack")
    message = str(caught.value)
    assert "\n" not in message and "simulation.py" in message and "PreferenceChecker.check" in message
    assert not (tmp_path / "pack").exists()


async def test_longctx_full_replays_earlier_episodes_as_the_published_agent_did(pack, open_rt, fake, settings, bench):
    """Earlier tasks replayed as chat before the current one, without each episode's last reply
    (the published longctx_full never stored it: docs/fidelity.md TF1)."""
    from memaudit.adapters.registry import get_adapter

    src, pack_dir = pack
    script(fake)
    user, (first, second) = bench.users[0], bench.tasks["user_001"][:2]
    async with open_rt(replace(settings, prompts_dir=pack_dir)) as rt:
        adapter = get_adapter("longctx_full")(AdapterContext(rt.llm, rt.embedder, scope="run/user_001"))
        episode = await run_episode(rt.llm, adapter, user, first, run="run", max_turns=5, k=5)
        fake.requests.clear()
        await run_episode(rt.llm, adapter, user, second, run="run", max_turns=1, k=5)
    (request,) = sent(fake)["agent"]
    scope: dict = {}
    exec(compile((src / "agents/agent_longctx.py").read_text(), "agent_longctx.py", "exec"), scope)  # stand-in
    system = {"role": "system", "content": scope["_SYSTEM_PROMPT"]}
    said = [{"role": "user", "content": t.user_text} for t in episode.turns]
    replies = [{"role": "assistant", "content": t.assistant} for t in episode.turns]
    assert len(episode.turns) == 3
    assert request == [system, {"role": "user", "content": first.text}, replies[0], said[0], replies[1], said[1],
                       said[2], {"role": "user", "content": second.text}]
