"""A-Mem's own memory-side requests, read from the A-mem-sys the published checkout vendors (the
library the published `amem` ran; nothing of it is executed): the content-analysis prompt
(`AgenticMemorySystem.analyze_content`), the evolution prompt (`_evolution_system_prompt`, set in
`__init__`) and the neighbour lines it is filled with (`find_related_memories`), the system line
A-Mem's OpenAI controller sends before each (`OpenAIController.get_completion`), and the response
format of each call (`get_completion(…, response_format=…)`: name, schema, strictness). The pack
writes the two prompts as `memory_amem_note.md` and `memory_amem_evolve.md` and the rest into
`rollout_layout.json` (`amem`); memaudit's `amem` then sends these requests and applies the answers
as A-Mem does (adapters/amem.py)."""
from __future__ import annotations

from memaudit.published.code import Shape, assigned, attribute_assigned, augmented, format_template, \
    keyword_literal, message_text, template, text
from memaudit.published.rollout import Reader

MEMORY_SYSTEM = "A-mem-sys/agentic_memory/memory_system.py"
CONTROLLER = "A-mem-sys/agentic_memory/llm_controller.py"
SYSTEM_LINE = "OpenAIController.get_completion"
ANALYZE = "AgenticMemorySystem.analyze_content"
EVOLVE = "AgenticMemorySystem._evolution_system_prompt"
PROCESS = "AgenticMemorySystem.process_memory"
RELATED = "AgenticMemorySystem.find_related_memories"
# What each value of A-Mem's evolution template and neighbour line is here (memaudit's names).
EVOLVE_VALUES = {"context": "context", "content": "content", "keywords": "keywords",
                 "nearest_neighbors_memories": "neighbours", "neighbor_number": "count"}
NEIGHBOUR_VALUES = {"doc_id": "id", "timestamp": "timestamp", "content": "content", "context": "context",
                    "str keywords": "keywords", "str tags": "tags"}
ROLE = "memory (amem)"
# How A-Mem makes and indexes a note (memory_system.py `MemoryNote`, retrievers.py `add_document`),
# facts of its code rather than text: ids are uuid4 strings, and the index appends the context
# unless it is the default, an empty one too. memaudit's amem follows a pack that records them.
NOTES = {"id": "uuid4", "empty_context_indexed": True}


def build(reader: Reader) -> tuple[dict, dict, dict]:
    """({prompt file: (role, where, system, user)}, the `amem` layout, {prompt file: where it was read})."""
    system = reader.read(CONTROLLER, SYSTEM_LINE, lambda: message_text(reader.fn(CONTROLLER, SYSTEM_LINE), "system"))
    analyze = reader.fn(MEMORY_SYSTEM, ANALYZE)
    note = reader.read(MEMORY_SYSTEM, ANALYZE, lambda: template(assigned(analyze, "prompt"), {"content": "content"}))
    init = reader.fn(MEMORY_SYSTEM, "AgenticMemorySystem.__init__")
    evolve = reader.read(MEMORY_SYSTEM, EVOLVE, lambda: format_template(
        text(attribute_assigned(init, EVOLVE.split(".")[1])), EVOLVE_VALUES))
    related = reader.fn(MEMORY_SYSTEM, RELATED)
    neighbour = reader.read(MEMORY_SYSTEM, RELATED, lambda: template(augmented(related, "memory_str"),
                                                                     NEIGHBOUR_VALUES))
    layout = {"note": reader.read(MEMORY_SYSTEM, ANALYZE, lambda: _response_format(analyze)),
              "evolve": reader.read(MEMORY_SYSTEM, PROCESS,
                                    lambda: _response_format(reader.fn(MEMORY_SYSTEM, PROCESS))),
              "neighbour": neighbour, "notes": NOTES}
    where = {"memory_amem_note": f"{MEMORY_SYSTEM} {ANALYZE}, {CONTROLLER} {SYSTEM_LINE}",
             "memory_amem_evolve": f"{MEMORY_SYSTEM} {EVOLVE}, {CONTROLLER} {SYSTEM_LINE}"}
    prompts = {"memory_amem_note": (ROLE, where["memory_amem_note"], system, note),
               "memory_amem_evolve": (ROLE, where["memory_amem_evolve"], system, evolve)}
    published = {**where, "memory_amem_evolve": f"{where['memory_amem_evolve']}, {RELATED}, {PROCESS}"}
    return prompts, layout, published


def _response_format(fn) -> dict:
    """A-Mem's `response_format={"type": "json_schema", "json_schema": {name, schema[, strict]}}`."""
    value = keyword_literal(fn, "get_completion", "response_format")
    spec = value.get("json_schema") if isinstance(value, dict) and value.get("type") == "json_schema" else None
    if not (isinstance(spec, dict) and isinstance(spec.get("name"), str) and isinstance(spec.get("schema"), dict)
            and isinstance(spec.get("strict", False), bool)):
        raise Shape("its response_format is not a json_schema with a name and a schema")
    return {"name": spec["name"], "schema": spec["schema"], "strict": spec.get("strict", False)}
