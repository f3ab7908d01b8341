"""How a run or a scoring pass was made: the protocol version, and per role the model, the
structured-output dialect (backend), the sampling parameters sent and the context window; for a
run, also the memory systems' embedding model where it is not the bundled one. Prompt hashes are
recorded beside it (runs.prompt_hashes, score pass configs).

A run records this when it is opened and refuses to resume under anything else, so one run id
never mixes two models, protocols or prompts. Which models a run actually used is read back from
its call log (memaudit/tables/metrics.py `run_models`), which also covers runs recorded before
provenance existed."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from memaudit.canonical import differences
from memaudit.config import BUNDLED_EMBED_MODEL, EMBEDDED_MODEL, EMBEDDING_GROUPS, Settings
from memaudit.errors import BadInput
from memaudit.llm.dialects import FORWARDED, sampling
from memaudit.prompts import prompt_pack
from memaudit.roles import DIALOGUE_PHASE, MEMORY, MEMORY_PHASE, MEMT_POLICY, RECOVERY_JUDGE, ROLE_SPECS, groups_of
from memaudit.store import Run, Store

# Bump when a change to the pipeline can move a number (turn order, prompt behaviour, caps,
# serialisation): runs made under another version are not resumed into.
# 2: the published turn order, uncapped dialogue, generic assistant, indented dump_all.
# 3: the published scoring and attribution rules (issue 23), per-system assistant prompt, no caps.
PROTOCOL_VERSION = "3"

ROLLOUT_ROLES = groups_of(DIALOGUE_PHASE, MEMORY_PHASE)
DIALOGUE_ROLES = groups_of(DIALOGUE_PHASE)  # recorded, not called, in a teacher-forced run


def role_provenance(settings: Settings, role: str, temperature: float | None = None,
                    max_tokens: int | None = None) -> dict:
    """What `role` is sent when its caller asks for (temperature, max_tokens), after the role's
    config and the dialect's rules (memaudit/llm/dialects/ `sampling`: a reasoning model is given
    the reasoning budget). For memory roles, whose adapters choose per call, a requested None means
    "the adapter's own value". A parameter refused by the server (a 400 naming it) is not reflected
    here: it is learned during the run (param_refusals), and recording it here would make a resume
    or a replay see a change that is none; each call's key holds what was sent, and the run records
    the adaptation beside its roles (`adapted_roles`)."""
    rc = settings.role(role)
    sent = sampling(rc, temperature, max_tokens)
    recorded = {"model": rc.model, "backend": rc.backend, "temperature": sent.temperature, "top_p": sent.top_p,
                "max_tokens": sent.max_tokens, "reasoning_effort": sent.reasoning_effort,
                "context_window": rc.context_window}
    # The embedded model's demo setting (memaudit/config.py); a configured endpoint records none.
    return recorded if rc.repair_attempts is None else {**recorded, "repair_attempts": rc.repair_attempts}


# Where a run's provenance records the roles whose server refused a sampling parameter: written
# after the rollout, so it is no part of what a resume must match (memaudit/rollout/runner.py).
ADAPTED = "adapted"


async def adapted_roles(roles: dict[str, dict], refusals) -> dict[str, list[str]]:
    """Per recorded role (`role_provenance`), the sampling parameters its model refused with a 400
    (`refusals`: memaudit/llm/dialects `Refusals`), which its calls were then sent without, at the
    model's default. Every role sends a temperature (a memory role its adapter's own), top_p only
    when configured; the memory roles also whatever a deployed library sent (the recording proxy
    forwards its sampling parameters: memaudit/llm/dialects FORWARDED)."""
    adapted = {}
    for role, recorded in roles.items():
        refused = await refusals.of(recorded["model"], recorded["backend"])
        params = [p for p in ("temperature", *FORWARDED) if p in refused and
                  (p == "temperature" or recorded.get(p) is not None or role == MEMORY)]
        if params:
            adapted[role] = params
    return adapted


def without_adapted(config: dict) -> dict:
    """A run config without the adaptations recorded after its rollout: what a resume compares."""
    provenance = config.get("provenance")
    if not isinstance(provenance, dict) or ADAPTED not in provenance:
        return config
    return {**config, "provenance": {k: v for k, v in provenance.items() if k != ADAPTED}}


def rollout_provenance(settings: Settings) -> dict:
    """Per role the sending, plus what else moves a number: the base seed, the prompt directory
    (name and hash: memaudit/prompts.py `prompt_pack`), which policy prompts memt runs with and,
    unless it is the bundled one, the embedding model of each memory role group."""
    roles = {}
    for role in ROLLOUT_ROLES:
        spec = ROLE_SPECS.get(role)
        roles[role] = role_provenance(settings, role, spec and spec.temperature, spec and spec.max_tokens)
    memt = "mem-t-templates" if settings.memt_prompts is not None else "memaudit-prompts"
    made = {"protocol": PROTOCOL_VERSION, "roles": roles, "seed": settings.seed,
            "prompts": prompts_provenance(settings.prompts_dir), MEMT_POLICY: memt}
    embeddings = embeddings_provenance(settings)
    return {**made, "embeddings": embeddings} if embeddings else made


def embeddings_provenance(settings: Settings) -> dict:
    """Per memory role group whose embedding model is not the bundled one: the model, and whether an
    endpoint served it. Not the endpoint's URL (nor its key): like a chat role's endpoint it may move
    without moving a number, since vectors are cached by model name. Runs on the bundled model
    record nothing, as runs did before this was recorded."""
    found = {}
    for group in EMBEDDING_GROUPS:
        model, base_url, _ = settings.embedding(group)
        if model != BUNDLED_EMBED_MODEL or base_url:
            found[group] = {"model": model, "endpoint": base_url is not None}
    return found


def prompts_provenance(prompts_dir) -> dict:
    """The prompt directory a run or pass was made with: name and hash, and (unless it is memaudit's
    own, wherever that is installed) its path, which replay re-executes with."""
    pack = prompt_pack(prompts_dir)
    return pack if pack["name"] == "bundled" else {**pack, "dir": str(Path(prompts_dir).resolve())}


def teacher_forced_provenance(settings: Settings, episodes: str) -> dict:
    """A teacher-forced run (memaudit/rollout/teacher_forced.py; RunConfig.transcripts names its
    source run): the rollout provenance without the dialogue roles, which it never calls (another
    agent model must not block its resume), plus a digest of the episodes replayed."""
    live = rollout_provenance(settings)
    return {**live, "roles": {r: v for r, v in live["roles"].items() if r not in DIALOGUE_ROLES},
            "teacher_forced": {"episodes": episodes}}


# Where replay points the roles that were served by an endpoint: replay answers from the cache
# only, so this is never contacted (and a recorded URL, perhaps dead now, is never needed).
REPLAY_URL = "http://replay.invalid/v1"


def recorded_settings(base: Settings, roles: dict[str, dict], models: dict[str, dict] | None = None,
                      judges: dict[str, dict] | None = None, embeddings: dict[str, dict] | None = None) -> Settings:
    """`base` with the model settings that `roles` (role group -> recorded role provenance)
    record, so that role_provenance() gives back exactly what was recorded: the inverse of
    role_provenance, for replay. The recorded endpoint is not needed (see REPLAY_URL). Sampling
    values are configured only where the recorded ones differ from what would be sent anyway.
    Raises BadInput naming the role and value that no configuration reproduces. `models`: role
    groups that record no provenance (attribution), {"model", "backend"} read from the call log.
    `judges`: panel judge -> its recorded provenance, rebuilt as `[judges.NAME]` sections.
    `embeddings`: the recorded embeddings_provenance; a group it does not name keeps `base`'s.
    """
    sections = {group: _section(p) for group, p in {**(models or {}), **roles}.items()}
    for group in EMBEDDING_GROUPS:
        sections[group] = {**sections.get(group, {}), **_embedding_section(base, group, (embeddings or {}).get(group))}
    settings = replace(base, base_url=None, model=EMBEDDED_MODEL, backend="llamacpp", api_key=None,
                       context_window=None, role_sections=sections)
    for group, recorded in roles.items():
        _rebuild(sections[group], recorded, lambda: _sent(settings, group), f"roles.{group}")
    # A judge's section refines the recovery judge's (Settings.panel_judge): rebuilt after it. A
    # judge that recorded none keeps the section given now (a pass recorded before judges were).
    own = {name: {**_section(p), "model": p.get("model")} for name, p in (judges or {}).items()}
    settings = replace(settings, judge_sections={**base.judge_sections, **own})
    for name, recorded in (judges or {}).items():
        _rebuild(own[name], recorded, lambda: _sent(settings.panel_judge(name), RECOVERY_JUDGE), f"judges.{name}")
    return settings


# Role fields a replay neither rebuilds nor compares: it answers from the cache, where a failure is
# an outcome, so how many repairs a call was allowed never matters to it (and runs recorded before
# the embedded setting do not name it).
NOT_REPLAYED = ("repair_attempts",)


def _rebuild(section: dict, recorded: dict, sent, field: str) -> None:
    """Configure in `section` the sampling values where what `sent()` gives differs from
    `recorded`; raise BadInput when it still differs."""
    now = sent()
    for param in ("temperature", "max_tokens"):
        if now.get(param) != recorded.get(param):
            section[param] = recorded.get(param)
    still = {k: v for k, v in sent().items() if v is not None and k not in NOT_REPLAYED}
    wanted = {k: v for k, v in recorded.items() if v is not None and k not in NOT_REPLAYED}
    if still != wanted:
        what = sorted(k for k in still.keys() | wanted.keys() if still.get(k) != wanted.get(k))
        raise BadInput(f"the recorded {field} settings ({', '.join(what)}) cannot be rebuilt from the runs' "
                       "provenance; give the original --config", field=field)


def _section(recorded: dict) -> dict:
    embedded = recorded.get("model") == EMBEDDED_MODEL and recorded.get("backend") == "llamacpp"
    section = {} if embedded else {"base_url": REPLAY_URL, "model": recorded.get("model"),
                                   "backend": recorded.get("backend")}
    for key in ("context_window", "reasoning_effort"):
        if recorded.get(key) is not None:
            section[key] = recorded[key]
    return section


def _embedding_section(base: Settings, group: str, recorded: dict | None) -> dict:
    """The embed_model (and embed_base_url) keys of a group's section: the recorded model (behind
    REPLAY_URL when an endpoint served it: replay reads its vectors from the store), else `base`'s."""
    if recorded is None:
        section = base.role_sections.get(group, {})
        return {key: section[key] for key in ("embed_model", "embed_base_url") if key in section}
    return {"embed_model": recorded["model"], **({"embed_base_url": REPLAY_URL} if recorded.get("endpoint") else {})}


def _sent(settings: Settings, group: str) -> dict:
    spec = ROLE_SPECS.get(group)
    return role_provenance(settings, group, spec and spec.temperature, spec and spec.max_tokens)


def merge_roles(found: dict[str, dict], roles: dict[str, dict], where: str, seen: dict[str, str],
                kind: str = "") -> None:
    """Add `roles` (recorded by `where`) to `found`; one role (or, with `kind` "judge ", one panel
    judge) recorded two ways cannot be replayed under one configuration: name both."""
    for group, recorded in roles.items():
        if group in found and found[group] != recorded:
            raise BadInput(f"{seen[group]} and {where} were made with different {kind}{group} settings "
                           f"({', '.join(differences(found[group], recorded))}); replay them separately with --runs",
                           field="runs")
        found.setdefault(group, recorded)
        seen.setdefault(group, where)


def recorded_embeddings(runs: list[Run]) -> dict[str, dict]:
    """The embedding models the runs recorded per role group (provenance.embeddings_provenance);
    one group recorded two ways cannot be replayed under one configuration: name both runs."""
    found: dict[str, tuple[dict, str]] = {}
    for run in runs:
        for group, recorded in ((run.config.provenance or {}).get("embeddings") or {}).items():
            first, where = found.setdefault(group, (recorded, run.run))
            if first != recorded:
                raise BadInput(f"runs {where} and {run.run} were made with different {group} embeddings "
                               f"({', '.join(differences(first, recorded))}); replay them separately with --runs",
                               field="runs")
    return {group: recorded for group, (recorded, _) in found.items()}
