"""Tool requests and their emulation (memaudit/llm/tools.py): what a request may ask, the schema an
emulated call is held to, the conversation a server without tools is shown, and what counts as an
answer."""
from __future__ import annotations

import orjson
import pytest

from memaudit.llm.schema import problem
from memaudit.llm.tools import (ToolRequest, ToolRequestError, calls_problem, emulated_calls, emulated_messages,
                                emulation_schema)

NOTE = {"type": "function", "function": {"name": "note", "description": "Keep a note.", "parameters": {
    "type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
PATCH = {"type": "function", "function": {"name": "patch", "parameters": {
    "type": "object", "properties": {"ops": {"type": "array", "items": {"$ref": "#/$defs/Op"}}},
    "required": ["ops"], "$defs": {"Op": {"type": "object", "properties": {"op": {"enum": ["add", "remove"]}},
                                          "required": ["op"]}}}}}


def request(**fields) -> ToolRequest:
    return ToolRequest.of({"tools": [NOTE, PATCH], **fields})


@pytest.mark.parametrize("fields, said", [
    ({"tool_choice": "sometimes"}, "is not one of"),
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "does not name an offered tool"),
    ({"parallel_tool_calls": "yes"}, "true or false"),
    ({"tools": [NOTE, NOTE]}, "unique"),
    ({"tools": [{"type": "function", "function": {}}]}, "needs"),
])
def test_a_request_memaudit_cannot_serve_is_refused_with_the_reason(fields, said):
    with pytest.raises(ToolRequestError, match=said):
        request(**fields)


def test_modes_and_the_fields_sent_natively_are_what_the_library_sent():
    assert ToolRequest.of({"messages": []}) is None
    assert request().mode == "auto" and request().fields() == {"tools": [NOTE, PATCH]}
    assert request(tool_choice="any").mode == request(tool_choice="required").mode == "required"
    named = request(tool_choice={"type": "function", "function": {"name": "patch"}}, parallel_tool_calls=False)
    assert (named.mode, named.named) == ("required", "patch")
    assert named.fields()["parallel_tool_calls"] is False


def test_the_emulation_schema_holds_names_and_arguments_to_the_offered_tools():
    schema = emulation_schema(request(tool_choice="required"))
    good = {"tool_calls": [{"name": "note", "arguments": {"text": "hi"}},
                           {"name": "patch", "arguments": {"ops": [{"op": "add"}]}}]}
    assert problem(good, schema) is None
    assert problem({"tool_calls": []}, schema)  # required: at least one
    assert problem({"tool_calls": [{"name": "other", "arguments": {}}]}, schema)
    assert problem({"tool_calls": [{"name": "note", "arguments": {}}]}, schema)  # its parameters
    # The tool's own definitions move to the root, where references from inside the schema reach them.
    assert schema["$defs"] == {"patch.Op": PATCH["function"]["parameters"]["$defs"]["Op"]}
    assert "patch.Op" in orjson.dumps(schema["properties"]).decode()
    auto = emulation_schema(request(parallel_tool_calls=False))
    assert problem({"content": "nothing to keep", "tool_calls": []}, auto) is None
    assert problem({"content": "", "tool_calls": good["tool_calls"]}, auto)  # at most one call


def test_a_conversation_with_tool_calls_is_flattened_for_a_server_without_tools():
    plain = [{"role": "system", "content": "You keep notes."}, {"role": "user", "content": "hi"}]
    assert emulated_messages(plain, None) == plain  # no tools: the same messages, the same keys
    history = plain + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "note", "arguments": '{"text": "hi"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Note kept."}]
    shown = emulated_messages(history, request())
    assert shown[0]["role"] == "system" and "- note: Keep a note." in shown[0]["content"]
    assert orjson.loads(shown[2]["content"]) == {"tool_calls": [{"name": "note", "arguments": {"text": "hi"}}]}
    assert shown[3] == {"role": "user", "content": "Result of tool call c1: Note kept."}
    assert emulated_messages([{"role": "user", "content": "hi"}], request())[0]["role"] == "system"


def test_answers_are_checked_against_the_request_and_emulated_calls_get_stable_ids():
    calls = emulated_calls({"tool_calls": [{"name": "note", "arguments": {"text": "x"}}]}, "s1:abcdef0123456789ff")
    assert calls == [{"id": "call_abcdef0123456789_0", "type": "function",
                      "function": {"name": "note", "arguments": '{"text":"x"}'}}]
    assert calls_problem(request().fields(), calls) is None
    assert calls_problem(request().fields(), []) is None  # auto: no call is an answer
    assert "made none" in calls_problem(request(tool_choice="required").fields(), [])
    named = request(tool_choice={"type": "function", "function": {"name": "patch"}}).fields()
    assert "requires 'patch'" in calls_problem(named, calls)
    assert "not one of the offered" in calls_problem(ToolRequest.of({"tools": [PATCH]}).fields(), calls)


@pytest.mark.parametrize("arguments", ['{"text": "cut', '"just text"', "[1, 2]"])
def test_a_call_whose_arguments_are_not_a_json_object_is_not_an_answer(arguments):
    """A client sets such a call aside and its library goes on without it: a lost write, never a
    silent one."""
    call = {"id": "c1", "type": "function", "function": {"name": "note", "arguments": arguments}}
    assert "not a JSON object" in calls_problem(request().fields(), [call])


@pytest.mark.parametrize("arguments", ["", '{"text": "two\nlines"}'])
def test_arguments_are_read_as_openai_clients_read_them(arguments):
    call = {"id": "c1", "type": "function", "function": {"name": "note", "arguments": arguments}}
    assert calls_problem(request().fields(), [call]) is None
