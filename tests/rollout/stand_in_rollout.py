"""The rollout half of the stand-in checkout (tests/scoring/stand_in.py): the published runner's
files, class, function and variable names where the pack reads them, and the same way of building
each request (f-strings, joins, conditionals), with our own text and some different separators,
profile keys and a different recent-reply count, so a test can tell read from assumed. The files
run: tests execute them (with a stub model) to get the requests the published code would send."""
from __future__ import annotations

SIMULATION = '''"""stand-in simulation: the episode loop, the simulated user and the style rater"""
import json
from types import SimpleNamespace

_USER_SYSTEM_PROMPT = """\\
STAND-IN PERSON PLAYER. You are the person described in the user message; stay them.
Answer only as JSON: {"feedback_type": "<label>", "text": "<what you say>"} — nothing else.
"""

_PREF_SYSTEM_PROMPT = """\\
STAND-IN STYLE RATER. For each numbered wish give 1..5 or "na".
Answer only as JSON: {"per_pref": [{"idx": 1, "score": 3, "reason": "..."}]}
"""


class UserSimulator:
    def __init__(self, user_id):
        user = load_user(user_id)
        self.memory_bank = user["memory_bank"]
        self.base_profile = user["base_profile"]

    def respond(self, task, agent_response, history, turn):
        profile_block = json.dumps({
            "who": self.base_profile,
            "facts": self.memory_bank,
        }, ensure_ascii=False, indent=2)

        history_block = self._format_history(history)

        recent_user_lines = [h["user"] for h in history[-2:]] if history else []
        recent_block = (
            "Lately you said (vary it):\\n"
            + "\\n".join(f"  · {t}" for t in recent_user_lines)
            if recent_user_lines else ""
        )

        user_prompt = (
            f"WHO YOU ARE:\\n{profile_block}\\n\\n"
            f"YOU ASKED:\\n{task}\\n\\n"
            f"UNTIL NOW:\\n{history_block}\\n"
            + (f"{recent_block}\\n\\n" if recent_block else "")
            + f"Reply {turn} from the assistant:\\n{agent_response}\\n\\n"
            f"Your move."
        )
        messages = [
            {"role": "system", "content": _USER_SYSTEM_PROMPT},
            {"role": "user", "content": user_prompt},
        ]
        result = json.loads(get_completion(messages, temperature=0.85))
        return SimpleNamespace(text=result["text"], is_done=result["feedback_type"] == "satisfied")

    def _format_history(self, history):
        if not history:
            return "(nothing yet)"
        return "\\n".join(f"A» {h['agent']}\\nU» {h['user']}" for h in history)


class PreferenceChecker:
    def check(self, user_id, task, agent_response):
        prefs = load_user(user_id)["memory_bank"].get("assistance_preference", [])
        pref_block = "\\n".join(
            f"({i+1}) {p.get('dimension','')}: {p.get('short','')} – {p.get('explanation','')}"
            for i, p in enumerate(prefs)
        )
        user_prompt = (
            f"WISHES:\\n{pref_block}\\n\\n"
            f"ASKED:\\n{task}\\n\\n"
            f"REPLY:\\n{agent_response}\\n\\n"
            f"Rate all {len(prefs)} wishes."
        )
        messages = [
            {"role": "system", "content": _PREF_SYSTEM_PROMPT},
            {"role": "user", "content": user_prompt},
        ]
        return get_completion(messages, temperature=0.0)


class Episode:
    def __init__(self, user_id, task, max_turns):
        self.user_id, self.task, self.max_turns = user_id, task, max_turns
        self.simulator = UserSimulator(user_id)
        self.pref_checker = PreferenceChecker()

    def run(self, agent_fn):
        history = []
        for turn_num in range(1, self.max_turns + 1):
            if history:
                agent_input = (
                    self.task + "\\n\\n~~ said before ~~\\n"
                    + "\\n".join(f"A» {h['agent']}\\nU» {h['user']}" for h in history)
                )
            else:
                agent_input = self.task
            agent_response = agent_fn(agent_input, history)
            self.pref_checker.check(self.user_id, self.task, agent_response)
            feedback = self.simulator.respond(task=self.task, agent_response=agent_response,
                                              history=history, turn=turn_num)
            history.append({"agent": agent_response, "user": feedback.text})
            if feedback.is_done:
                break
        return history
'''

_BLOCK = '''
_MEMORY_BLOCK = """\\
<<what you know of them>>
{memories}
<<end>>

"""
'''

_TAILORED = '''"""\\
STAND-IN HELPER for one person; suit the answer to them.

{memory_block}\\
Keep it short.
"""
'''

_PLAIN = '''"""\\
STAND-IN HELPER for one person.
Keep it short.
"""
'''

AGENTS = {
    "agents/agent.py": f'''"""stand-in amem agent"""
_SYSTEM_PROMPT = {_TAILORED}{_BLOCK}

class AMemAgent:
    def __call__(self, task, history):
        latest_user_msg = history[-1]["user"] if history else task
        memory_context = self._retrieve(latest_user_msg)
        return self._call_llm(self._build_messages(task, memory_context))

    def _retrieve(self, query):
        results = self.memory.search(query, k=self.retrieve_k)
        if not results:
            return ""
        lines = []
        for r in results:
            tags = " / ".join(r.get("tags", [])) or "(untagged)"
            lines.append(f"· {{r['content']}} {{{{{{tags}}}}}}")
        return "\\n".join(lines)

    def _build_messages(self, task, memory_context):
        memory_block = _MEMORY_BLOCK.format(memories=memory_context) if memory_context else ""
        system = _SYSTEM_PROMPT.format(memory_block=memory_block)
        return [{{"role": "system", "content": system}}, {{"role": "user", "content": task}}]
''',
    "agents/agent_mem0.py": f'''"""stand-in mem0 agent"""
_SYSTEM_PROMPT = {_TAILORED}{_BLOCK}

class Mem0Agent:
    def __call__(self, task, history):
        latest_user_msg = history[-1]["user"] if history else task
        return self._call_llm(self._build_messages(task, self._retrieve(latest_user_msg)))

    def _retrieve(self, query):
        res = self.memory.search(query, top_k=self.retrieve_k)
        items = res.get("results") if isinstance(res, dict) else res
        if not items:
            return ""
        lines = [f"- {{it.get('memory') or it.get('content', '')}}" for it in items]
        return " ;\\n".join(lines)

    def _build_messages(self, task, memory_context):
        memory_block = _MEMORY_BLOCK.format(memories=memory_context) if memory_context else ""
        system = _SYSTEM_PROMPT.format(memory_block=memory_block)
        return [{{"role": "system", "content": system}}, {{"role": "user", "content": task}}]
''',
    "agents/agent_memt.py": f'''"""stand-in memt agent"""
_REPLY_SYSTEM_PROMPT = {_TAILORED}{_BLOCK}

class MemTAgent:
    def __call__(self, task, history):
        latest_user = history[-1]["user"] if history else task
        mem_lines = [m["content"] for m in self.memory.retrieve(latest_user)["observations"]]
        memory_context = "\\n".join(f"> {{ln}}" for ln in mem_lines[:20] if ln)
        return self._reply_with_context(task, memory_context)

    def _reply_with_context(self, task, memory_context):
        memory_block = _MEMORY_BLOCK.format(memories=memory_context) if memory_context else ""
        system = _REPLY_SYSTEM_PROMPT.format(memory_block=memory_block)
        return self._call_reply_llm([{{"role": "system", "content": system}}, {{"role": "user", "content": task}}])
''',
    "agents/agent_nomem.py": f'''"""stand-in nomem agent"""
_SYSTEM_PROMPT = {_PLAIN}

class NoMemoryAgent:
    def __call__(self, task, history):
        return self._call_llm([{{"role": "system", "content": _SYSTEM_PROMPT}}, {{"role": "user", "content": task}}])
''',
    "agents/agent_longctx.py": f'''"""stand-in long-context agent"""
_SYSTEM_PROMPT = {_PLAIN}''',
}

# A-Mem as the published checkout vendors it (A-mem-sys/agentic_memory): the class, method and
# attribute names where the pack reads A-Mem's requests, its way of building them (a constant plus
# the content, a `.format` template set in __init__, neighbour lines added one by one), our own text,
# another schema name ("reply") and another field order than memaudit's, so a test can tell read
# from assumed. Runnable with stubs (tests/adapters/test_amem_published.py runs it).
AMEM = {
    "A-mem-sys/agentic_memory/llm_controller.py": '''"""stand-in A-Mem model controller"""


class OpenAIController:
    def __init__(self, client, model):
        self.client, self.model = client, model

    def get_completion(self, prompt, response_format, temperature=1.0):
        kwargs = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": "STAND-IN: answer with JSON, nothing else."},
                {"role": "user", "content": prompt},
            ],
            "response_format": response_format,
            "temperature": temperature,
        }
        return self.client.complete(**kwargs)
''',
    "A-mem-sys/agentic_memory/memory_system.py": '''"""stand-in A-Mem memory system"""
import json


class AgenticMemorySystem:
    def __init__(self, retriever=None, llm_controller=None):
        self.memories = {}
        self.retriever = retriever
        self.llm_controller = llm_controller
        self._evolution_system_prompt = \'\'\'
            STAND-IN NOTE GARDENER. Should the fresh note reshape the notes near it?
            Fresh note, about: {context}
            says: {content}
            words: {keywords}
            Nearby notes, id first:
            {nearest_neighbors_memories}
            That is {neighbor_number} notes. Answer in JSON:
            {{"should_evolve": true, "actions": ["strengthen", "update_neighbor"], "suggested_connections": [],
              "tags_to_update": [], "new_context_neighborhood": [], "new_tags_neighborhood": []}}
            \'\'\'

    def analyze_content(self, content):
        prompt = """STAND-IN NOTE READER. Give key words, one sentence of context and a few tags
            as JSON (keywords, context, tags) for this note:
            """ + content
        try:
            response = self.llm_controller.get_completion(prompt, response_format={"type": "json_schema", "json_schema": {
                "name": "reply",
                "schema": {"type": "object", "properties": {
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "keywords": {"type": "array", "items": {"type": "string"}},
                    "context": {"type": "string"}}}}})
            return json.loads(response)
        except Exception:
            return {"keywords": [], "context": "General", "tags": []}

    def find_related_memories(self, query, k=5):
        results = self.retriever.search(query, k)
        memory_str = ""
        memory_ids = []
        for i, doc_id in enumerate(results["ids"][0]):
            metadata = results["metadatas"][0][i]
            memory_str += f"#{doc_id} | at {metadata.get('timestamp', '')} | says {metadata.get('content', '')} | about {metadata.get('context', '')} | words {str(metadata.get('keywords', []))} | tags {str(metadata.get('tags', []))}\\n"
            memory_ids.append(doc_id)
        return memory_str, memory_ids

    def process_memory(self, note):
        neighbors_text, memory_ids = self.find_related_memories(note.content, k=5)
        prompt = self._evolution_system_prompt.format(
            content=note.content,
            context=note.context,
            keywords=note.keywords,
            nearest_neighbors_memories=neighbors_text,
            neighbor_number=len(memory_ids),
        )
        response = self.llm_controller.get_completion(prompt, response_format={"type": "json_schema", "json_schema": {
            "name": "reply",
            "schema": {
                "type": "object",
                "properties": {
                    "actions": {"type": "array", "items": {"type": "string"}},
                    "should_evolve": {"type": "boolean"},
                    "suggested_connections": {"type": "array", "items": {"type": "string"}},
                    "tags_to_update": {"type": "array", "items": {"type": "string"}},
                    "new_context_neighborhood": {"type": "array", "items": {"type": "string"}},
                    "new_tags_neighborhood": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}},
                },
                "required": ["actions", "should_evolve", "suggested_connections", "tags_to_update",
                             "new_context_neighborhood", "new_tags_neighborhood"],
                "additionalProperties": False,
            },
            "strict": True,
        }})
        return json.loads(response), memory_ids
''',
}
