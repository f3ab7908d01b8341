"""A small JSON-schema checker for the subset our role schemas use (type, properties, required,
additionalProperties, enum, items, minItems, maxItems, minimum, maximum, minLength, maxLength, anyOf).
It returns the first problem as a sentence the model can act on in a repair prompt."""
from __future__ import annotations

_TYPES = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
}


def problem(value, schema: dict, path: str = "$") -> str | None:
    """None when `value` satisfies `schema`, else a one-line description of the first violation."""
    if "anyOf" in schema:
        problems = [problem(value, s, path) for s in schema["anyOf"]]
        return None if any(p is None for p in problems) else problems[0]
    expected = schema.get("type")
    if expected is not None:
        kinds = expected if isinstance(expected, list) else [expected]
        if not any(_is(value, k) for k in kinds):
            return f"{path} must be {' or '.join(kinds)}, got {type(value).__name__}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{path} must be one of {schema['enum']}, got {value!r}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{path} must not be empty" if schema.get("minLength") == 1 else f"{path} is too short"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{path} is longer than {schema['maxLength']} characters"
    if _is(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path} must be >= {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path} must be <= {schema['maximum']}"
    if isinstance(value, dict):
        for name in schema.get("required", ()):
            if name not in value:
                return f"{path} is missing the field {name!r}"
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            extra = sorted(set(value) - set(props))
            if extra:
                return f"{path} has unexpected fields {extra}"
        for name, sub in props.items():
            if name in value:
                found = problem(value[name], sub, f"{path}.{name}")
                if found:
                    return found
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{path} needs at least {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{path} allows at most {schema['maxItems']} items"
        if "items" in schema:
            for i, item in enumerate(value):
                found = problem(item, schema["items"], f"{path}[{i}]")
                if found:
                    return found
    return None


def _is(value, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])
