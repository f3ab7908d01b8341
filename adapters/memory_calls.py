"""Memory-side model calls: render the system's prompt file, call the shared client, and turn a
model failure into a counted, skipped write instead of a crashed rollout.

The client has already retried transport errors and repaired invalid structured output when one of
these errors reaches us, so the write is skipped and recorded in the adapter's state
(`write_failures`, `failure_log`): the snapshot shows how many writes a system lost, and a replay
meets the same failures from the cache. A cache miss under `--cache replay` is not a model failure
and propagates."""
from __future__ import annotations

from memaudit.ask import ask
from memaudit.errors import ContextOverflow, InvalidOutput
from memaudit.prompts import load_prompt
from memaudit.roles import RoleSpec

# InvalidOutput includes a content refusal; an EndpointError (misconfigured or unreachable endpoint)
# is not a lost write but a broken command, and propagates.
MODEL_FAILURES = (InvalidOutput, ContextOverflow)


class FailureLog:
    """Counts memory-side calls that failed after the client's retries, in snapshot-able form.

    A library that leaves the tool choice to the model (langmem) and whose tool requests never got
    a call stored nothing, without a failure: while none of its requests has got a call, each one
    counts as a lost write too (`uncalled`). The snapshot's `write_failures` (what Table 2 and
    rollout's summary count) include them; `tool_requests`/`tool_calls` say why (only written for a
    library that made such requests, so other snapshots stay as they were)."""

    def __init__(self):
        self.write_failures = 0  # calls that failed
        self.entries: list[dict] = []
        self.tool_requests = 0
        self.tool_calls = 0  # tool requests answered with a call

    def record(self, role: str, clock: str, exc: Exception) -> None:
        self.write_failures += 1
        self.entries.append({"role": role, "clock": clock, "error": type(exc).__name__})

    def tools(self, requests: int, answered: int) -> None:
        self.tool_requests += requests
        self.tool_calls += answered

    @property
    def uncalled(self) -> int:
        return self.tool_requests if not self.tool_calls else 0

    @property
    def lost(self) -> int:
        """Writes lost so far: failed calls and uncalled tool requests (the snapshot's write_failures)."""
        return self.write_failures + self.uncalled

    def to_state(self) -> dict:
        tools = {"tool_requests": self.tool_requests, "tool_calls": self.tool_calls} if self.tool_requests else {}
        return {"write_failures": self.lost, "failure_log": [dict(e) for e in self.entries],
                **tools}

    def load_state(self, state: dict) -> None:
        self.tool_requests, self.tool_calls = state.get("tool_requests", 0), state.get("tool_calls", 0)
        self.write_failures = state.get("write_failures", 0) - self.uncalled
        self.entries = [dict(e) for e in state.get("failure_log", [])]


async def model_call(adapter, role: str, messages: list[dict], *, clock: str, seed_parts: tuple,
                     max_tokens: int | None = None, schema: dict | None = None, temperature: float = 0.0,
                     schema_name: str | None = None, repairs: int | None = None):
    """Call `role` with ready messages; the CallResult, or None (and a recorded failure) when the
    model failed for good. `max_tokens` None: no output cap (the published memory systems sent none;
    the embedded model's cap still applies). `schema_name`: the schema's own name in the request;
    `repairs`: `LLM.call` (0: an invalid answer is a failure at once)."""
    try:
        return await ask(adapter.ctx.llm, role, messages=messages, seed_parts=seed_parts,
                         spec=RoleSpec(None, schema, temperature, max_tokens), schema_name=schema_name,
                         repairs=repairs)
    except MODEL_FAILURES as exc:
        adapter.failures.record(role, clock, exc)
        return None


async def memory_call(adapter, role: str, prompt: str, *, schema: dict, clock: str, max_tokens: int | None = None,
                      seed_parts: tuple, temperature: float = 0.0, schema_name: str | None = None,
                      repairs: int | None = None, **values) -> dict | None:
    """Render `prompts/<prompt>.md`, call `role` with structured output; None (and a recorded
    failure) when the model failed for good."""
    messages = load_prompt(prompt, adapter.ctx.llm.settings.prompts_dir).render(**values)
    result = await model_call(adapter, role, messages, max_tokens=max_tokens, clock=clock, seed_parts=seed_parts,
                              schema=schema, temperature=temperature, schema_name=schema_name, repairs=repairs)
    return None if result is None else result.data
