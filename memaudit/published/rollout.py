"""The rollout half of the published prompt pack: the assistant (per memory system), the simulated
user and the preference judge, whose requests the published runner assembles in code.

Each piece is read from the checkout with memaudit/published/code.py (nothing is executed): the
system prompts are module constants; the user messages, memory lines and conversation lines are
f-strings, joins and conditionals inside named functions. What comes out is, per role, a verbatim
prompt file (system prompt and user template) and, for `rollout_layout.json`, the smaller pieces
the templates are filled from; memaudit/published/layout.py assembles them the way the published
code did. A piece whose code has another shape fails the build with one line naming the file and
the function or constant."""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Callable

from memaudit.errors import BadInput
from memaudit.published.code import Shape, appended, assigned, conditional, find, find_join, format_template, \
    function, join, returned, template, text, verbatim
from memaudit.roles import AGENT, PREF_JUDGE, ROLE_SPECS, SIMULATOR

SIMULATION = "simulation.py"
LAYOUT_VERSION = 1


@dataclass(frozen=True)
class Agent:
    """One published assistant: its file and system-prompt constant, and (for the systems that show
    retrieved memories) the memory-block constant and the method that writes the memory lines."""
    system: str
    file: str
    prompt: str
    block: str | None = None
    lines: str | None = None      # Class.method writing the memory lines
    kind: str | None = None       # how it writes them: appended (a loop) | listed (a list) | joined


AGENTS = (
    Agent("amem", "agents/agent.py", "_SYSTEM_PROMPT", "_MEMORY_BLOCK", "AMemAgent._retrieve", "appended"),
    Agent("mem0", "agents/agent_mem0.py", "_SYSTEM_PROMPT", "_MEMORY_BLOCK", "Mem0Agent._retrieve", "listed"),
    Agent("memt", "agents/agent_memt.py", "_REPLY_SYSTEM_PROMPT", "_MEMORY_BLOCK", "MemTAgent.__call__", "joined"),
    Agent("nomem", "agents/agent_nomem.py", "_SYSTEM_PROMPT"),
    Agent("longctx_full", "agents/agent_longctx.py", "_SYSTEM_PROMPT"),
)


class Reader:
    """The checkout for one build (`tree(file)`, `constant(file, name)`: memaudit/published/pack.py),
    turning a Shape found in `file` at `where` into a one-line BadInput."""

    def __init__(self, tree: Callable[[str], ast.Module], constant: Callable[[str, str], object], root: str):
        self.tree, self.constant, self.root = tree, constant, root

    def read(self, file: str, where: str, make: Callable):
        try:
            return make()
        except Shape as exc:
            raise BadInput(f"{where} {exc} (not the shape of the published code)", file=f"{self.root}/{file}",
                           field=where) from None

    def fn(self, file: str, qualname: str) -> ast.FunctionDef:
        return self.read(file, qualname, lambda: function(self.tree(file), qualname))

    def string(self, file: str, name: str, fills: dict[str, str] | None = None) -> str:
        """A string constant: a `.format` template (`fills`), or sent as it is."""
        value = self.constant(file, name)
        if not isinstance(value, str):
            raise BadInput(f"{name} is not a string", file=f"{self.root}/{file}", field=name)
        return self.read(file, name, lambda: verbatim(value) if fills is None else format_template(value, fills))


def build(reader: Reader) -> tuple[dict, dict, dict]:
    """({prompt file: (role, where, system, user)}, the layout, {prompt file: where it was read})."""
    prompts, published = {}, {}
    layout = {"version": LAYOUT_VERSION, AGENT: {**_agent_message(reader), "systems": {}}}
    for agent in AGENTS:
        name = f"agent_{agent.system}"
        system, layout[AGENT]["systems"][agent.system] = _agent(reader, agent, name)
        prompts[name] = (f"agent ({agent.system})", f"{agent.file} {agent.prompt}", system, "{{message}}")
        published[name] = f"{agent.file} {agent.prompt}" + (f", {agent.block}, {agent.lines}" if agent.block else "")
    published["agent_message"] = f"{SIMULATION} Episode.run"
    user, layout[SIMULATOR] = _simulator(reader)
    where = f"{SIMULATION} _USER_SYSTEM_PROMPT, UserSimulator.respond"
    name = ROLE_SPECS[SIMULATOR].prompt
    prompts[name] = (SIMULATOR, where, reader.string(SIMULATION, "_USER_SYSTEM_PROMPT"), user)
    published[name] = f"{where}, UserSimulator._format_history"
    user, layout[PREF_JUDGE] = _pref_judge(reader)
    where = f"{SIMULATION} _PREF_SYSTEM_PROMPT, PreferenceChecker.check"
    name = ROLE_SPECS[PREF_JUDGE].prompt
    prompts[name] = (PREF_JUDGE, where, reader.string(SIMULATION, "_PREF_SYSTEM_PROMPT"), user)
    published[name] = where
    return prompts, layout, published


def _agent(reader: Reader, agent: Agent, name: str) -> tuple[str, dict]:
    if agent.block is None:
        return reader.string(agent.file, agent.prompt), {"prompt": name}
    system = reader.string(agent.file, agent.prompt, {"memory_block": "memory"})
    block = reader.string(agent.file, agent.block, {"memories": "memories"})
    fn = reader.fn(agent.file, agent.lines)
    lines = reader.read(agent.file, agent.lines, lambda: _memory_lines(fn, agent.kind))
    return system, {"prompt": name, "memory_block": block, **lines}


def _memory_lines(fn: ast.FunctionDef, kind: str) -> dict:
    """The template of one memory line, how lines are joined and, for amem, how tags are listed."""
    if kind == "joined":  # "sep".join(f"…{line}…" for line in lines if line)
        joined = join(assigned(fn, "memory_context"))
        return {"item": template(joined.item, {joined.targets[0]: "content"}), "item_sep": joined.sep,
                "skip_empty": joined.skips_empty}
    if kind == "appended":  # lines.append(f"…") in a loop; tags = "sep".join(…) or "…"
        tags = assigned(fn, "tags", ast.BoolOp)
        out = {"item": template(appended(fn, "lines"), {"content": "content", "tags": "tags"}),
               "tags_sep": join(tags.values[0]).sep, "tags_empty": text(tags.values[-1])}
    else:  # lines = [f"…" for item in items]
        made = assigned(fn, "lines", ast.ListComp)
        out = {"item": template(made.elt, {"memory": "content", "content": "content"})}
    return {**out, "item_sep": join(returned(fn)[-1]).sep, "skip_empty": False}


def _agent_message(reader: Reader) -> dict:
    """The assistant's user message: the task, then (after turn 1) the conversation so far."""
    run = reader.fn(SIMULATION, "Episode.run")

    def read():
        value = assigned(run, "agent_input", ast.BinOp)
        turns = find_join(value)
        return {"message": template(value, {"task": "task", f"join {turns.source}": "conversation"}),
                "turn": template(turns.item, {"agent": "agent", "user": "user"}), "turn_sep": turns.sep}
    return reader.read(SIMULATION, "Episode.run", read)


def _simulator(reader: Reader) -> tuple[str, dict]:
    respond = reader.fn(SIMULATION, "UserSimulator.respond")
    history = reader.fn(SIMULATION, "UserSimulator._format_history")

    def read():
        prompt = assigned(respond, "user_prompt")
        recent_test, recent_body = conditional(find(prompt, ast.IfExp))
        user = template(prompt, {"profile_block": "profile", "task": "task", "history_block": "history",
                                 f"if {recent_test}": "recent_section", "turn": "turn", "agent_response": "reply"})
        lines_body = conditional(assigned(respond, "recent_block", ast.IfExp))[1]
        lines = find_join(lines_body)
        turns = join(returned(history)[-1])
        return user, {
            "profile_keys": _profile_keys(assigned(respond, "profile_block")),
            "recent_count": _recent_count(assigned(respond, "recent_user_lines")),
            "recent_section": template(recent_body, {recent_test: "recent"}),
            "recent": template(lines_body, {f"join {lines.source}": "lines"}),
            "recent_line": template(lines.item, {lines.targets[0]: "line"}), "recent_sep": lines.sep,
            "history_empty": text(returned(history)[0]),
            "history_turn": template(turns.item, {"agent": "agent", "user": "user"}), "history_sep": turns.sep}
    return reader.read(SIMULATION, "UserSimulator.respond", read)


def _profile_keys(node: ast.expr) -> list[str]:
    """`json.dumps({"k1": self.base_profile, "k2": self.memory_bank}, ensure_ascii=False, indent=2)`:
    the two keys (the dump itself is memaudit/canonical.py `dumps_indented`)."""
    if not (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "dumps" and len(node.args) == 1
            and isinstance(node.args[0], ast.Dict)):
        raise Shape("the profile is not a JSON dump of a dict")
    if {k.arg: ast.dump(k.value) for k in node.keywords} != {"ensure_ascii": ast.dump(ast.Constant(False)),
                                                             "indent": ast.dump(ast.Constant(2))}:
        raise Shape("the profile dump is not indented by 2 with non-ASCII kept")
    if [getattr(v, "attr", None) for v in node.args[0].values] != ["base_profile", "memory_bank"]:
        raise Shape("the profile dict does not hold the profile, then the bank")
    return [text(k) for k in node.args[0].keys]


def _recent_count(node: ast.expr) -> int:
    """How many of the user's own last messages are listed: `history[-N:]`."""
    cut = find(node, ast.Slice)
    try:
        count = -ast.literal_eval(cut.lower) if cut.lower is not None and cut.upper is None else None
    except ValueError:
        count = None
    if not isinstance(count, int) or count <= 0:
        raise Shape("the recent replies are not the last N messages")
    return count


def _pref_judge(reader: Reader) -> tuple[str, dict]:
    check = reader.fn(SIMULATION, "PreferenceChecker.check")

    def read():
        block = join(assigned(check, "pref_block"))
        user = template(assigned(check, "user_prompt"), {"pref_block": "preferences", "task": "task",
                                                         "agent_response": "reply", f"len {block.source}": "count"})
        item = template(block.item, {f"{block.targets[0]}+1": "number", "dimension": "dimension", "short": "short",
                                     "explanation": "explanation"})
        return user, {"preference": item, "preference_sep": block.sep}
    return reader.read(SIMULATION, "PreferenceChecker.check", read)
