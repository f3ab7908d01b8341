"""Tool calls (OpenAI's `tools`, `tool_choice`, `parallel_tool_calls`) as a request asks for them,
and the two ways memaudit answers them (the dialect of the role's endpoint decides which):

- native: the request's tool fields are sent to the endpoint as they came, they are part of the
  cache key, and the answer's `message.tool_calls` are kept (and cached) beside its text;
- emulated, for servers that take a JSON schema but no tools (llama.cpp's server, vLLM without a
  tool parser): the tools become a structured-output schema `{"tool_calls": [{"name",
  "arguments"}]}` (names limited to the offered tools, each tool's arguments to its parameters),
  the conversation's earlier tool calls and results become plain messages, a system note lists
  the tools, and the structured answer is turned back into OpenAI tool calls with ids derived from
  the call's key (stable under replay).

Either way a request whose `tool_choice` requires a tool (`required`, or a named tool) and gets no
tool call is an invalid answer: repaired, then a counted failure, never an empty success."""
from __future__ import annotations

import json
from dataclasses import dataclass

import orjson

NATIVE, EMULATED = "native", "emulated"
# `any` is how some clients (LangChain for Anthropic-style models) say `required`.
CHOICES = ("none", "auto", "required", "any")
TOOL_RESULT = "Result of tool call {id}: {content}"
EMULATION_NOTE = (
    "You can call tools. Answer with one JSON object and nothing else: "
    '{{"tool_calls": [{{"name": "<tool name>", "arguments": {{<the tool\'s parameters>}}}}]{content}}}. '
    "{rule}\nThe tools:\n{catalogue}")
RULES = {"auto": "Call the tools that fit, or none (an empty list) and answer in `content` instead.",
         "required": "Call at least one tool."}
ONE_CALL = " Call at most one tool."
# Tool calls kept of one answer: far more than any library asks for at once (a memory manager
# records a handful of memories per message); beyond it an answer of thousands of calls would run
# unbounded. The rest are dropped and counted (memaudit/llm/client.py read_attempt).
MAX_TOOL_CALLS = 64


class ToolRequestError(ValueError):
    """A request whose tool fields memaudit cannot serve (an unknown tool_choice, a named tool that
    was not offered, a tool without a name)."""


@dataclass(frozen=True)
class ToolRequest:
    """The tool fields of a chat request, as sent (`choice` None: the request named none, which
    means `auto`)."""
    tools: tuple
    choice: str | dict | None
    parallel: bool | None

    @classmethod
    def of(cls, request: dict) -> "ToolRequest | None":
        """The tool fields of a chat-completions request, checked; None when it offers no tools."""
        tools = request.get("tools")
        if not tools:
            return None
        if not isinstance(tools, list) or not all(_tool_name(t) for t in tools):
            raise ToolRequestError("every tool needs {'type': 'function', 'function': {'name': …}}")
        names = [_tool_name(t) for t in tools]
        if len(set(names)) != len(names):
            raise ToolRequestError(f"tool names must be unique: {names}")
        choice = request.get("tool_choice")
        if isinstance(choice, dict):
            named = (choice.get("function") or {}).get("name") if choice.get("type") == "function" else None
            if named not in names:
                raise ToolRequestError(f"tool_choice {choice} does not name an offered tool ({', '.join(names)})")
        elif choice is not None and choice not in CHOICES:
            raise ToolRequestError(f"tool_choice {choice!r} is not one of {', '.join(CHOICES)} or a named function")
        parallel = request.get("parallel_tool_calls")
        if parallel is not None and not isinstance(parallel, bool):
            raise ToolRequestError("parallel_tool_calls must be true or false")
        return cls(tuple(tools), choice, parallel)

    @property
    def names(self) -> list[str]:
        return [_tool_name(t) for t in self.tools]

    @property
    def named(self) -> str | None:
        """The tool the request names, if it names one."""
        return self.choice["function"]["name"] if isinstance(self.choice, dict) else None

    @property
    def mode(self) -> str:
        """none | auto | required (a named tool is required too)."""
        if self.named is not None or self.choice in ("required", "any"):
            return "required"
        return self.choice or "auto"

    def fields(self) -> dict:
        """The request's tool fields as sent natively (and keyed): what the library sent, nothing added."""
        sent = {"tools": list(self.tools), "tool_choice": self.choice, "parallel_tool_calls": self.parallel}
        return {name: value for name, value in sent.items() if value is not None}


def _json_object(arguments: str) -> bool:
    """Whether a call's arguments read as a JSON object the way OpenAI clients read them: control
    characters allowed in strings, empty arguments as `{}` (a tool without parameters)."""
    if not arguments.strip():
        return True
    try:
        return isinstance(json.loads(arguments, strict=False), dict)
    except ValueError:
        return False


def _tool_name(tool) -> str | None:
    if not isinstance(tool, dict) or tool.get("type", "function") != "function":
        return None
    name = (tool.get("function") or {}).get("name")
    return name if isinstance(name, str) and name else None


# -- what an answer to a tool request means ---------------------------------------------------------

def answered_calls(response: dict) -> list[dict]:
    """The tool calls of a chat-completions answer in OpenAI's shape (arguments as JSON text), in order."""
    try:
        found = response["choices"][0]["message"].get("tool_calls") or []
    except (KeyError, IndexError, TypeError, AttributeError):
        return []
    calls = []
    for n, call in enumerate(found if isinstance(found, list) else []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments = function.get("arguments")
        calls.append({"id": str(call.get("id") or f"call_{n}"), "type": "function",
                      "function": {"name": function["name"], "arguments": arguments if isinstance(arguments, str)
                                   else orjson.dumps(arguments or {}).decode()}})
    return calls


def calls_problem(fields: dict, calls: list[dict]) -> str | None:
    """Why tool calls do not answer a request with these tool fields (`ToolRequest.fields`), or None.
    No call is a problem only where the request requires one. A call's arguments must be a JSON
    object: OpenAI clients set other arguments aside (LangChain's `invalid_tool_calls`) and the
    libraries using them go on without the call, a silently lost write."""
    request = ToolRequest.of(fields)
    offered = set(request.names)
    for call in calls:
        name = call["function"]["name"]
        if name not in offered:
            return f"it called {name!r}, which is not one of the offered tools ({', '.join(request.names)})"
        if request.named is not None and name != request.named:
            return f"it called {name!r}, but the request requires {request.named!r}"
        if not _json_object(call["function"]["arguments"]):
            return f"it called {name!r} with arguments that are not a JSON object"
    if not calls and request.mode == "required":
        return ("the request requires a tool call" + (f" to {request.named!r}" if request.named else "")
                + " and the answer made none")
    return None


# -- emulation by structured output -----------------------------------------------------------------

def emulation_schema(request: ToolRequest) -> dict:
    """`{"tool_calls": [{"name", "arguments"}]}` for these tools: each item is one offered tool's name
    with that tool's parameters; at least one item when a tool is required, exactly one when the
    request names the tool (as a forced function call is made once), at most one when parallel
    calls are off; a `content` string beside them where calling no tool is allowed."""
    offered = [t for t in request.tools if request.named in (None, _tool_name(t))]
    defs: dict = {}
    items = [{"type": "object", "properties": {"name": {"type": "string", "enum": [_tool_name(t)]},
                                               "arguments": _hoisted(_parameters(t), _tool_name(t), defs)},
              "required": ["name", "arguments"], "additionalProperties": False} for t in offered]
    calls: dict = {"type": "array", "items": items[0] if len(items) == 1 else {"anyOf": items}}
    if request.mode == "required":
        calls["minItems"] = 1
    if request.parallel is False or request.named is not None:
        calls["maxItems"] = 1
    properties = {"tool_calls": calls}
    if request.mode == "auto":
        properties = {"content": {"type": "string"}, **properties}
    schema = {"type": "object", "properties": properties, "required": list(properties),
              "additionalProperties": False}
    return {**schema, "$defs": defs} if defs else schema


def _parameters(tool: dict) -> dict:
    parameters = tool["function"].get("parameters")
    return parameters if isinstance(parameters, dict) and parameters else {"type": "object", "properties": {}}


def _hoisted(parameters: dict, tool: str, defs: dict) -> dict:
    """A tool's parameter schema inside the emulation schema: its local definitions move to the
    root's `$defs` under the tool's name, and its references follow them."""
    local = {**parameters.get("definitions", {}), **parameters.get("$defs", {})}
    renamed = {name: f"{tool}.{name}" for name in local}

    def follow(node):
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in renamed and ref.startswith(("#/$defs/", "#/definitions/")):
                node = {**node, "$ref": f"#/$defs/{renamed[ref.rsplit('/', 1)[-1]]}"}
            return {k: follow(v) for k, v in node.items() if k not in ("$defs", "definitions")}
        if isinstance(node, list):
            return [follow(v) for v in node]
        return node

    for name, definition in local.items():
        defs[renamed[name]] = follow(definition)
    return follow(parameters)


def emulated_messages(messages: list[dict], request: ToolRequest | None) -> list[dict]:
    """The conversation for a server without tools: earlier tool calls as the assistant's JSON
    answer, tool results as user messages, and (when tools are offered and may be called) the note
    that lists them, added to the first system message or as one."""
    plain = [_plain(m) for m in messages]
    if request is None or request.mode == "none":
        return plain
    note = emulation_note(request)
    if plain and plain[0].get("role") == "system" and isinstance(plain[0].get("content"), str):
        return [{**plain[0], "content": f"{plain[0]['content']}\n\n{note}"}, *plain[1:]]
    return [{"role": "system", "content": note}, *plain]


def emulation_note(request: ToolRequest) -> str:
    offered = [t for t in request.tools if request.named in (None, _tool_name(t))]
    catalogue = "\n".join(f"- {_tool_name(t)}: {t['function'].get('description') or ''}\n  parameters: "
                          f"{orjson.dumps(_parameters(t)).decode()}" for t in offered)
    rule = RULES[request.mode] if request.named is None else f"Call the tool {request.named!r}."
    return EMULATION_NOTE.format(content=', "content": "<your reply, or empty>"' if request.mode == "auto" else "",
                                 rule=rule + (ONE_CALL if request.parallel is False else ""), catalogue=catalogue)


def _plain(message: dict) -> dict:
    if message.get("role") == "tool":
        return {"role": "user", "content": TOOL_RESULT.format(id=message.get("tool_call_id", "?"),
                                                              content=message.get("content") or "")}
    calls = message.get("tool_calls")
    if message.get("role") == "assistant" and calls:
        said = {"tool_calls": [{"name": c["function"]["name"], "arguments": _arguments(c["function"].get("arguments"))}
                               for c in calls]}
        if message.get("content"):
            said = {"content": message["content"], **said}
        return {"role": "assistant", "content": orjson.dumps(said).decode()}
    return message


def _arguments(arguments):
    if isinstance(arguments, str):
        try:
            return orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments
    return arguments


def emulated_calls(data: dict, key: str) -> list[dict]:
    """An emulated answer's calls in OpenAI's shape, with ids from the call's cache key (the first
    MAX_TOOL_CALLS of them: the cached answer keeps the rest)."""
    digest = key.split(":", 1)[-1][:16]
    return [{"id": f"call_{digest}_{n}", "type": "function",
             "function": {"name": call["name"], "arguments": orjson.dumps(call["arguments"]).decode()}}
            for n, call in enumerate((data.get("tool_calls") or [])[:MAX_TOOL_CALLS])]


# -- does a native endpoint honour tools? ----------------------------------------------------------
# A server can take `tools` and ignore them (answering in text): the failure that left a library's
# memory silently empty (mem0ai/mem0#4175). Before its first native tool call, an endpoint is asked
# once to call a named tool (memaudit/llm/client.py `LLM.check_native_tools`).
PROBE_TOOL = "record_word"
PROBE = ToolRequest(({"type": "function", "function": {
    "name": PROBE_TOOL, "description": "Record one word.",
    "parameters": {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]}}},),
    {"type": "function", "function": {"name": PROBE_TOOL}}, None)
PROBE_MESSAGES = [{"role": "user", "content": 'Record the word "ready" with the tool.'}]
# Then once more with the choice left to the model (`auto`, what langmem sends) on a request that
# plainly calls for the tool: a server whose tool parser handles forced calls only answers it in
# text, and a library leaving the choice to the model would store nothing, without a failure.
AUTO_PROBE = ToolRequest(PROBE.tools, None, None)
AUTO_PROBE_MESSAGES = [{"role": "user", "content": 'Use the record_word tool now to record the word "ready". '
                                                   "Do not answer in text."}]


def ignores_tools(response: dict) -> bool:
    """Whether an answer to the probe shows a server that ignores tools (no call to the named tool)."""
    return not any(call["function"]["name"] == PROBE_TOOL for call in answered_calls(response))
