"""How a run or a scoring pass was made: the protocol version, and per role the model, the
structured-output dialect (backend), the sampling parameters sent and the context window. Prompt
hashes are recorded beside it (runs.prompt_hashes, score pass configs).

A run records this when it is opened and refuses to resume under anything else, so one run id
never mixes two models, protocols or prompts. Which models a run actually used is read back from
its call log (`run_models`), which also covers runs recorded before provenance existed."""
from __future__ import annotations

from memaudit.config import Settings, role_group
from memaudit.roles import ROLE_SPECS
from memaudit.store import Store

# Bump when a change to the pipeline can move a number (turn order, prompt behaviour, caps,
# serialisation): runs made under another version are not resumed into.
# 2: the published turn order, uncapped dialogue, generic assistant, indented dump_all.
PROTOCOL_VERSION = "2"

ROLLOUT_ROLES = ("agent", "simulator", "pref_judge", "memory", "memt_policy")
DIALOGUE_ROLES = ("agent", "simulator", "pref_judge")  # recorded, not called, in a teacher-forced run


def role_provenance(settings: Settings, role: str, temperature: float | None = None,
                    max_tokens: int | None = None) -> dict:
    """What `role` is sent when its caller asks for (temperature, max_tokens). For memory roles,
    whose adapters choose per call, None means "the adapter's own value"."""
    rc = settings.role(role)
    sent_temperature, sent_max_tokens = rc.sampling(temperature, max_tokens)
    return {"model": rc.model, "backend": rc.backend, "temperature": sent_temperature,
            "max_tokens": sent_max_tokens, "context_window": rc.context_window}


def rollout_provenance(settings: Settings) -> dict:
    roles = {}
    for role in ROLLOUT_ROLES:
        spec = ROLE_SPECS.get(role)
        roles[role] = role_provenance(settings, role, spec and spec.temperature, spec and spec.max_tokens)
    return {"protocol": PROTOCOL_VERSION, "roles": roles}


def teacher_forced_provenance(settings: Settings, source_run: str, episodes: str) -> dict:
    """A teacher-forced run (memaudit/rollout/teacher_forced.py): the rollout provenance without the
    dialogue roles, which it never calls (another agent model must not block its resume), plus the
    run whose transcripts it replays and a digest of the episodes replayed."""
    live = rollout_provenance(settings)
    return {**live, "roles": {r: v for r, v in live["roles"].items() if r not in DIALOGUE_ROLES},
            "teacher_forced": {"source_run": source_run, "episodes": episodes}}


def teacher_forced_source(config: dict | None) -> str | None:
    """The run whose transcripts a teacher-forced run replayed; None for a live or imported run."""
    return (((config or {}).get("provenance") or {}).get("teacher_forced") or {}).get("source_run")


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
        if isinstance(item, dict) and item:
            out.update(_flat(item, f"{path}."))
        else:
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


async def run_models(store: Store, run: str) -> dict[str, str]:
    """Role group -> the model(s) the run's artifacts were made with, from its call log ("a, b"
    when a role used two). Empty for an imported run, which has no calls."""
    rows = await store.fetchall(
        "SELECT DISTINCT c.role, c.model FROM call_uses u JOIN calls c ON c.key = u.key WHERE u.run=?", (run,))
    found: dict[str, set[str]] = {}
    for row in rows:
        found.setdefault(role_group(row["role"]), set()).add(row["model"])
    return {role: ", ".join(sorted(models)) for role, models in sorted(found.items())}
