"""Per-user metrics of a run, computed from the stored rows (PROTOCOL §4–5).

A  satisfied episodes / all episodes (a fraction here; tables show it ×100)
C  mean assistant replies per episode, over all episodes and over satisfied ones only
D  mean of all scorable turn scores (turns.preference_score not NULL); None if there are none
E  items in the user's last memory snapshot and the mean characters of their `content`
B  per access mode and k: the mean of the five per-category means of the reconstruction scores
   (category-balanced). `overflow` rows score 0 and are counted; `failed` rows (and `ok` rows
   without a score) are left out and counted.

Episodes that ended `failed` stay in A's and C's denominators (they are episodes the user did not
finish) and are counted; simulator fallback turns are counted, and so are the memory system's lost
writes (`memory_write_failures`: memory-side calls that failed for good, so nothing was stored).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from memaudit.roles import ATTRIBUTION, DISCLOSURE, ELICITATION, MEMORY_PHASE, ORACLE, groups_of, role_group
from memaudit.store import Store
from memaudit.types import ATTRIBUTION_LABELS, CATEGORIES, DEFAULT_VARIANT


@dataclass
class UserMetrics:
    user_id: str
    episodes: int
    A: float
    C: float
    C_satisfied: float | None
    D: float | None
    items: int | None  # None: no snapshot stored for this user
    chars: float | None
    failed_episodes: int
    simulator_fallbacks: int
    pref_judge_failures: int  # turns the preference judge could not rate (D is over the others)
    memory_write_failures: int | None  # None: the system keeps no count (or the run was imported)
    embed_truncated: int | None = None  # texts its embedding model cut; None: not counted (window unknown)


@dataclass
class UserRecovery:
    user_id: str
    categories: dict  # category -> mean score, or None when the user has no scored target there
    B: float | None
    overflow: int
    failed: int


@dataclass
class ModeRecovery:
    mode: str
    k: int
    users: dict = field(default_factory=dict)  # user_id -> UserRecovery

    def B(self) -> dict:
        return {u: r.B for u, r in self.users.items()}

    def category(self, name: str) -> dict:
        return {u: r.categories.get(name) for u, r in self.users.items()}

    @property
    def overflow(self) -> int:
        return sum(r.overflow for r in self.users.values())

    @property
    def failed(self) -> int:
        return sum(r.failed for r in self.users.values())


async def memory_write_failures(store: Store, run: str) -> dict[str, int | None]:
    """user -> memory-side writes lost for good, as of the user's final snapshot (None: the system
    keeps no count). Where adapters keep the count: store/episodes.py write_failures."""
    return await store.episodes.last_write_failures(run)


async def uncalled_tool_requests(store: Store, run: str) -> dict[str, int]:
    """user -> tool requests of the run's memory library that never got a call (counted among the
    user's write failures: store/episodes.py uncalled_tool_requests); users without any left out."""
    return {user: n for user, n in (await store.episodes.last_uncalled_tools(run)).items() if n}


def total_write_failures(counts) -> int | None:
    """The sum over users of a count some systems keep (writes lost, texts cut at the embedding
    model's window), None when no user's system keeps it."""
    known = [n for n in counts if n is not None]
    return sum(known) if known else None


async def user_metrics(store: Store, run: str) -> dict[str, UserMetrics]:
    """A, C, D, E and failure counts per user with at least one stored episode."""
    by_user: dict[str, list] = {}
    async for e in store.episodes.episode_rows(run):
        by_user.setdefault(e["user_id"], []).append((e["end_reason"], e["n_turns"]))
    scores: dict[str, list[float]] = {}
    fallbacks: dict[str, int] = {}
    judge_failures: dict[str, int] = {}
    async for t in store.episodes.turn_rows(run):
        judge_failures[t["user_id"]] = judge_failures.get(t["user_id"], 0) + int(t["judge_failed"])
        if t["preference_score"] is not None:
            scores.setdefault(t["user_id"], []).append(t["preference_score"])
        fallbacks[t["user_id"]] = fallbacks.get(t["user_id"], 0) + int(t["fallback"])
    last = await store.episodes.last_figures(run)  # items, chars/item, memory writes lost, texts cut

    out: dict[str, UserMetrics] = {}
    for user, eps in sorted(by_user.items()):  # eps: (end_reason, n_turns) of each episode
        satisfied = [n for end, n in eps if end == "satisfied"]
        pref = scores.get(user)
        items, chars, lost, cut = last.get(user, (None, None, None, None))
        out[user] = UserMetrics(
            user_id=user, episodes=len(eps), A=len(satisfied) / len(eps),
            C=sum(n for _, n in eps) / len(eps),
            C_satisfied=sum(satisfied) / len(satisfied) if satisfied else None,
            D=sum(pref) / len(pref) if pref else None,
            items=items, chars=chars,
            failed_episodes=sum(end == "failed" for end, _ in eps),
            simulator_fallbacks=fallbacks.get(user, 0),
            pref_judge_failures=judge_failures.get(user, 0),
            memory_write_failures=lost, embed_truncated=cut)
    return out


def counted_score(status: str, score: float | None) -> float | None:
    """The score a target counts with in B: an overflow counts 0, a failed target (or an `ok` one
    without a score) is left out (None)."""
    if status == "overflow":
        return 0.0
    return score if status == "ok" else None


def user_recovery(user_id: str, rows: list[tuple[str, float | None, str]]) -> UserRecovery:
    """Category-balanced B of one user from (category, score, status) rows.

    A category with no counted target (none stored, or all failed) is left out of the mean;
    a user with no counted target at all has B = None.
    """
    per_category: dict[str, list[float]] = {}
    overflow = failed = 0
    for category, score, status in rows:
        counted = counted_score(status, score)
        if counted is None:
            failed += 1
            continue
        overflow += status == "overflow"
        per_category.setdefault(category, []).append(counted)
    means = {c: (sum(per_category[c]) / len(per_category[c]) if c in per_category else None) for c in CATEGORIES}
    present = [m for m in means.values() if m is not None]
    return UserRecovery(user_id, means, sum(present) / len(present) if present else None, overflow, failed)


async def recovery(store: Store, run: str, *, variant: str = DEFAULT_VARIANT) -> dict[tuple[str, int], ModeRecovery]:
    """Per-user recovery for every (mode, k) the run was scored with, in sorted order."""
    # The rows come by mode, k and user: each user's B is taken as soon as the user's rows are in,
    # so a run's rows are never held at once.
    grouped: dict[tuple[str, int], dict[str, UserRecovery]] = {}
    key, rows = None, []
    async for r in store.scores.score_rows(run, variant):
        if (r["mode"], r["k"], r["user_id"]) != key:
            if key is not None:
                grouped.setdefault(key[:2], {})[key[2]] = user_recovery(key[2], rows)
            key, rows = (r["mode"], r["k"], r["user_id"]), []
        rows.append((r["category"], r["score"], r["status"]))
    if key is not None:
        grouped.setdefault(key[:2], {})[key[2]] = user_recovery(key[2], rows)
    return {(mode, k): ModeRecovery(mode, k, dict(sorted(users.items())))
            for (mode, k), users in sorted(grouped.items())}


async def attribution_counts(store: Store, run: str, *, variant: str = DEFAULT_VARIANT) -> dict[tuple[str, int], dict]:
    """Counts of every attribution label per (mode, k); labels never seen count 0."""
    rows = await store.attributions.label_counts(run, variant)
    out: dict[tuple[str, int], dict] = {}
    for r in rows:
        counts = out.setdefault((r["mode"], r["k"]), {label: 0 for label in ATTRIBUTION_LABELS})
        counts[r["label"]] = counts.get(r["label"], 0) + r["n"]
    return out


def steps_label(steps: list) -> str | None:
    """The label the recorded attribution steps lead to (an attribution's stored `stages`; None when
    they stopped before a verdict)."""
    by_name = {s.get("name"): s for s in steps}
    if ORACLE in by_name and not by_name[ORACLE].get("can_invite", True):
        return "task_design_failure"
    if by_name.get(DISCLOSURE, {}).get("disclosed"):
        return "memory_failure"
    return by_name.get(ELICITATION, {}).get("label")


# Labels memaudit gives where the published runner scored 0 and asked the steps: an overflowing
# store ("unknown" -> 0) and a failed reader or judge call (0); a failed step is `unclassified` too.
RELABELLED = ("overflow", "unclassified")


def published_label(label: str, steps: list, ep_index: int | None) -> str:
    """The label the published runner would have given: it scored an overflowing store or a failed
    slot-fill or judge call 0 and ran the target through the attribution steps, which memaudit
    records for such rows too. A row whose steps stopped before a verdict stays `unclassified`."""
    if label not in RELABELLED:
        return label
    if ep_index is None and not steps:
        return "no_targeted_task"
    return steps_label(steps) or "unclassified"


async def published_attribution_counts(store: Store, run: str, *,
                                       variant: str = DEFAULT_VARIANT) -> dict[tuple[str, int], dict]:
    """`attribution_counts` as the published code would have produced them (`published_label`).
    Only overflow and unclassified rows are relabelled, so only theirs are read whole (with their
    steps)."""
    out: dict[tuple[str, int], dict] = {}

    def add(mode: str, k: int, label: str, n: int) -> None:
        counts = out.setdefault((mode, k), {label: 0 for label in ATTRIBUTION_LABELS})
        counts[label] = counts.get(label, 0) + n
    for r in await store.attributions.label_counts(run, variant):
        if r["label"] not in RELABELLED:
            add(r["mode"], r["k"], r["label"], r["n"])
    for label in RELABELLED:
        for a in await store.attributions.load(run, variant=variant, label=label):
            add(a.mode, a.k, published_label(a.label, a.stages, a.ep_index), 1)
    return dict(sorted(out.items()))


def usage_group(role: str) -> str:
    """The token-usage group of a call role: the attribution steps share one group, adapter
    sub-roles (`memory.extract`, `memory:evolve` …) count as `memory`."""
    base = role.replace(":", ".").replace("/", ".").split(".", 1)[0]
    return ATTRIBUTION if base in (ORACLE, DISCLOSURE, ELICITATION) else base


async def token_usage(store: Store, run: str) -> dict[str, dict] | None:
    """Tokens per role group, each distinct call counted once per run; None without call records
    (imported releases)."""
    rows = await store.calls.usage_by_role(run)
    if not rows:
        return None
    out: dict[str, dict] = {}
    for r in rows:
        group = out.setdefault(usage_group(r["role"]),
                               {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0,
                                "reasoning_tokens": 0})
        group["calls"] += r["calls"]
        group["prompt_tokens"] += r["prompt"] or 0
        group["completion_tokens"] += r["completion"] or 0
        group["cached_tokens"] += r["cached"] or 0
        group["reasoning_tokens"] += r["reasoning"] or 0
    return dict(sorted(out.items()))


@dataclass
class MemorySide:
    """What a run's memory system cost at rollout: the wall time of each episode's writes and of each
    read, and apart from them of each operation that paid the system's start-up (seconds, over what
    no call cache answered: store/episodes.py `live_op_seconds`); per user the model calls its
    episodes made for the memory system (roles of the memory phase) and their tokens; and over its
    timed operations the counts of `Episodes.op_counts` (user messages, calls, cached, alone)."""
    write_seconds: list[float]
    search_seconds: list[float]
    calls: dict[str, int]
    tokens: dict[str, int]
    startup_seconds: list[float] = field(default_factory=list)
    ops: dict = field(default_factory=dict)

    def timed(self) -> str | None:
        """How the operations were timed: `alone` (rollout --time-alone), `with others` (beside the
        other systems and users of the rollout) or `mixed` (a run resumed the other way)."""
        if not self.ops.get("ops"):
            return None
        return {0: "with others", self.ops["ops"]: "alone"}.get(self.ops["alone"], "mixed")


MEMORY_GROUPS = groups_of(MEMORY_PHASE)


async def memory_side(store: Store, run: str) -> MemorySide:
    seconds = await store.episodes.live_op_seconds(run)
    calls: dict[str, int] = {}
    tokens: dict[str, int] = {}
    for r in await store.calls.memory_usage_by_user(run):
        if role_group(r["role"]) in MEMORY_GROUPS:
            calls[r["user_id"]] = calls.get(r["user_id"], 0) + r["calls"]
            tokens[r["user_id"]] = tokens.get(r["user_id"], 0) + (r["tokens"] or 0)
    return MemorySide(seconds["writes"], seconds["reads"], calls, tokens, seconds["startup"],
                      await store.episodes.op_counts(run))


async def run_models(store: Store, run: str) -> dict[str, str]:
    """Role group -> the model(s) the run's artifacts were made with, from its call log ("a, b"
    when a role used two). Empty for an imported run, which has no calls."""
    found: dict[str, set[str]] = {}
    for role, model in await store.calls.models_by_role(run):
        found.setdefault(role_group(role), set()).add(model)
    return {role: ", ".join(sorted(models)) for role, models in sorted(found.items())}


def lower_quantile(values, q: float) -> float | None:
    """The lower order statistic: sorted(values)[ceil(q·n) − 1] (never an average of two values).

    p50 of [1, 2, 3, 4] is 2; p90 of ten values is the 9th smallest; q·n is rounded to 12 digits
    first so that 0.9·10 counts as 9, not 9.000000000000002.
    """
    xs = sorted(v for v in values if v is not None)
    if not xs:
        return None
    index = max(0, math.ceil(round(q * len(xs), 12)) - 1)
    return float(xs[index])
