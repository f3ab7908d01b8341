"""`longctx_full`: every task, assistant reply and user reply stored verbatim; the reply prompt
replays all earlier tasks as chat history.

Items follow the published dump: content "[Task k] …" / "Agent: …" / "User: …", category
task / agent_reply / user_reply, task_index, turn. `search` is cosine over normalised
all-MiniLM-L6-v2 embeddings of `content` with a stable top-k, as the published system ranked them.
When the history no longer fits the agent's context window, the oldest messages are dropped and
counted instead of letting the reply call overflow."""
from __future__ import annotations

from memaudit.adapters.base import AgentContext, Event
from memaudit.adapters.indexed import IndexedMemory
from memaudit.llm.tokens import estimate_tokens

# Tokens kept free for the reply prompt's own text (instructions, memory block, task) and the reply.
HEADROOM_TOKENS = 1024

CATEGORY = {"task_start": "task", "assistant": "agent_reply", "user": "user_reply"}
CHAT_ROLE = {"task": "user", "agent_reply": "assistant", "user_reply": "user"}


def prefixed(event: Event) -> str:
    if event.kind == "task_start":
        return f"[Task {event.task_index}] {event.text}"
    return ("Agent: " if event.kind == "assistant" else "User: ") + event.text


def chat_message(item: dict) -> dict:
    """The item as the chat message it came from (prefix removed)."""
    content = item["content"]
    if item["category"] == "task":
        content = content.split("] ", 1)[1]
    else:
        content = content.split(": ", 1)[1]
    return {"role": CHAT_ROLE[item["category"]], "content": content}


class LongContextFull(IndexedMemory):
    name = "longctx_full"
    ITEM_KIND = "message"
    result_fields = ("content", "category", "task_index", "turn", "score")
    reply_prompt = "agent_plain"
    memory_calls = False

    def __init__(self, ctx):
        super().__init__(ctx)
        # The task whose episode is under way: its items are the conversation, not history. Memory is
        # read before the task itself is stored, so the last stored item cannot tell. Snapshots are
        # taken between episodes, where this is always None.
        self.open_task: int | None = None

    async def observe(self, event: Event) -> None:
        if event.kind == "episode_end":
            self.open_task = None
            return
        self.open_task = event.task_index
        await self.add(prefixed(event), category=CATEGORY[event.kind], task_index=event.task_index,
                       turn=event.turn)

    async def context(self, query: str, k: int) -> AgentContext:
        items = list(self.items.values())
        earlier = [i for i in items if i["task_index"] != self.open_task]
        history = [chat_message(i) for i in earlier]
        last_reply = {i["task_index"]: n for n, i in enumerate(earlier) if i["category"] == "agent_reply"}
        omits = sorted({*last_reply.values(), *(n for n, m in enumerate(history) if not m["content"])})
        # The conversation the reply prompt will carry: what is stored of the open episode plus the
        # message being answered, which is stored only after the reply.
        conversation = [chat_message(i) for i in items if i["task_index"] == self.open_task]
        conversation.append({"role": "user", "content": query})
        window = self.ctx.agent_context_window
        if window is None:
            return AgentContext(history=history, published_omits=tuple(omits))
        budget = window - HEADROOM_TOKENS - estimate_tokens(conversation)
        sizes = [estimate_tokens([m]) for m in history]
        total, dropped = sum(sizes), 0
        while dropped < len(history) and total > budget:
            total -= sizes[dropped]
            dropped += 1
        return AgentContext(history=history[dropped:], dropped=dropped,
                            published_omits=tuple(n - dropped for n in omits if n >= dropped))
