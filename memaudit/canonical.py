"""Canonical JSON: orjson with sorted keys, so equal data gives equal bytes. Cache keys, seeds,
stored JSON columns and release files all serialise through here. Two deliberate exceptions keep
keys in their native order, as the published runner did: JSON shown to a model
(`dumps_indented`) and the stored persona the simulator is shown (`dumps_native`)."""
from __future__ import annotations

import json
from typing import Any

import orjson


def canonical(obj: Any) -> bytes:
    """Compact canonical bytes (cache keys, seeds)."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def canonical_text(obj: Any) -> str:
    """Compact canonical text (the store's JSON columns)."""
    return canonical(obj).decode()


def canonical_pretty(obj: Any) -> bytes:
    """Canonical bytes indented by two spaces (files people read: the release layout)."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)


def dumps_indented(obj: Any) -> str:
    """JSON as the published runner handed it to a model, byte for byte: the standard library's
    `json.dumps(indent=2, ensure_ascii=False)`, keys in their native order (orjson writes some
    numbers differently, e.g. 1e-05, and NaN as null)."""
    return json.dumps(obj, indent=2, ensure_ascii=False)


def dumps_native(obj: Any) -> str:
    """Compact JSON with keys in their native order (a persona as the benchmark wrote it)."""
    return orjson.dumps(obj).decode()


# Readable differences between two configs (a run config with its provenance, as stored): what a
# resume, a replay group or a shard merge names when it refuses.
def differences(recorded: dict, now: dict) -> list[str]:
    """What differs between two configs, each as "<what> (recorded X, now Y)", readable paths:
    `provenance.roles.agent.model` reads "agent model"."""
    old, new = _flat(recorded), _flat(now)
    out = []
    for path in sorted(old.keys() | new.keys()):
        if old.get(path) != new.get(path):
            out.append(f"{_label(path)} (recorded {old.get(path)!r}, now {new.get(path)!r})")
    return out


def _flat(value: dict, prefix: str = "") -> dict:
    out = {}
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, dict):  # an empty dict says no more than an absent value
            out.update(_flat(item, f"{path}."))
        elif item is not None:
            out[path] = item
    return out


def _label(path: str) -> str:
    parts = path.split(".")
    if parts[:2] == ["provenance", "roles"]:
        return " ".join(parts[2:])
    if parts[0] == "provenance":
        return " ".join(parts[1:])
    if parts[0] == "prompts":
        return f"prompt {' '.join(parts[1:])}"
    return path
