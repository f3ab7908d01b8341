"""Benchmark for teacher-forced rollout (issue 15): what `rollout --transcripts RUN` costs against
the on-policy run it replays.

    .venv/bin/python perf/teacher_forced.py

On the bundled sample (3 users x 31 tasks), against the fake OpenAI server over real loopback HTTP
(memaudit.testing.serve), every episode ending on its second reply, with a fast fake encoder: for
each system an on-policy run, then a teacher-forced run of the same system over that run's own
transcripts, each system in a store of its own. Prints per system the requests the server received,
the calls each run used and their tokens (from the call log: distinct calls, per role group), and the
saving. A teacher-forced run makes only the memory system's own calls: no assistant, simulator or
preference-judge request.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.bench.instances import resolve_bench  # noqa: E402
from memaudit.config import load_settings  # noqa: E402
from memaudit.llm.embed import Embedder  # noqa: E402
from memaudit.roles import DIALOGUE_PHASE, PREF_JUDGE, SIMULATOR, groups_of  # noqa: E402
from memaudit.rollout.runner import run_rollout  # noqa: E402
from memaudit.runtime import open_runtime  # noqa: E402
from memaudit.tables.metrics import token_usage  # noqa: E402
from memaudit.testing.fake_openai import FakeOpenAI  # noqa: E402
from memaudit.testing.http_server import rate_every_preference, serve  # noqa: E402
from perf.sample_run import fast_encoder  # noqa: E402

SYSTEMS = ("nomem", "longctx_full", "mem0", "amem")
DIALOGUE = groups_of(DIALOGUE_PHASE)


def second_turn_satisfies(body: dict) -> dict:
    """The simulated user is satisfied once the conversation holds two assistant replies."""
    conversation = body["messages"][-1]["content"]
    done = conversation.count("Assistant: ") >= 2
    return {"feedback_type": "satisfied" if done else "followup",
            "text": "that works, thanks" if done else f"more detail please, I have {len(conversation)} constraints"}


def usage_line(usage: dict | None) -> tuple[int, int, str]:
    usage = usage or {}
    calls = sum(g["calls"] for g in usage.values())
    tokens = sum(g["prompt_tokens"] + g["completion_tokens"] for g in usage.values())
    roles = ", ".join(f"{role} {g['calls']}" for role, g in usage.items()) or "none"
    return calls, tokens, roles


async def main() -> None:
    fake = FakeOpenAI().on(SIMULATOR, second_turn_satisfies).on(PREF_JUDGE, rate_every_preference)
    fake.on_text(lambda body: f"A plan written after reading {len(str(body['messages']))} characters of context.")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, serve(fake) as url:
        for system in SYSTEMS:  # a store each: no system answers from another's cached dialogue
            settings = load_settings(db=Path(tmp) / f"{system}.db", base_url=url, model="fake", backend="openai",
                                     env={})
            async with open_runtime(settings) as rt:
                rt.embedder = Embedder(rt.store.vectors, encoder=fast_encoder)
                bench = await resolve_bench(rt.store, "sample")
                sent, start = len(fake.requests), time.perf_counter()
                [live] = await run_rollout(rt, bench, [system], progress=False)
                live_sent, live_wall = len(fake.requests) - sent, time.perf_counter() - start
                sent, start = len(fake.requests), time.perf_counter()
                [forced] = await run_rollout(rt, bench, [system], transcripts=live, progress=False)
                forced_requests = fake.requests[sent:]
                forced_wall = time.perf_counter() - start
                dialogue = [r for r in forced_requests if "response_format" not in r
                            or r["response_format"]["json_schema"]["name"] in DIALOGUE]
                episodes = len(await rt.store.episodes.load(forced))
                rows.append((system, episodes, live_sent, live_wall, usage_line(await token_usage(rt.store, live)),
                             len(forced_requests), forced_wall, usage_line(await token_usage(rt.store, forced)),
                             len(dialogue)))

    print(f"benchmark: bundled sample, {len(bench.users)} users x 31 tasks, every episode ending on its "
          f"second reply; fake server over loopback HTTP")
    for system, episodes, live_sent, live_wall, live_use, forced_sent, forced_wall, forced_use, dialogue in rows:
        (live_calls, live_tokens, live_roles), (forced_calls, forced_tokens, forced_roles) = live_use, forced_use
        saving = 1 - forced_tokens / live_tokens if live_tokens else 0.0
        print(f"{system}: {episodes} episodes")
        print(f"  on-policy:      {live_sent:5d} requests, {live_calls:5d} calls, {live_tokens:9d} tokens, "
              f"{live_wall:6.1f} s  ({live_roles})")
        print(f"  teacher-forced: {forced_sent:5d} requests, {forced_calls:5d} calls, {forced_tokens:9d} tokens, "
              f"{forced_wall:6.1f} s  ({forced_roles}); dialogue requests: {dialogue}")
        print(f"  saving: {live_calls - forced_calls} calls ({1 - forced_calls / live_calls:.1%}), "
              f"{live_tokens - forced_tokens} tokens ({saving:.1%})")


if __name__ == "__main__":
    anyio.run(main)
