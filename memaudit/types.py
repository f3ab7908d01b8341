"""The records that flow between stages: plain dataclasses, serialised with orjson."""
from __future__ import annotations

from dataclasses import dataclass, field

CATEGORIES = ("skill_memory", "knowledge_memory", "episodic_memory", "self_model", "assistance_preference")
BANK_COUNTS = {"skill_memory": 7, "knowledge_memory": 7, "episodic_memory": 7, "self_model": 5,
               "assistance_preference": 5}
# What each category holds and what it does not: shown to the slot-fill reader and appended to the
# retrieve query (prompts/category_guides.json in a prompt pack replaces it).
CATEGORY_DEFINITIONS = {
    "skill_memory": (
        "What the person can actually do and how well: practical abilities and their proficiency ceilings. "
        "NOT what they know about the world (knowledge_memory), NOT what they believe about their own "
        "abilities (self_model), NOT a past event (episodic_memory), NOT how they like to be helped "
        "(assistance_preference)."),
    "knowledge_memory": (
        "What the person knows, does not know, or misunderstands about the outside world: facts, rules, "
        "domains, how things work. NOT facts about themselves (self_model), NOT what they can do "
        "(skill_memory), NOT a past event (episodic_memory)."),
    "episodic_memory": (
        "A specific past event anchored in time, with the consequence it had: when X happened, it led to Y. "
        "NOT a stable trait, habit or ability (skill_memory, self_model), NOT general knowledge "
        "(knowledge_memory)."),
    "self_model": (
        "What the person believes about themselves: how they rate their own abilities, character and "
        "identity, which may contradict what they can really do or know. NOT their actual skill "
        "(skill_memory) or actual knowledge (knowledge_memory), NOT a past event (episodic_memory)."),
    "assistance_preference": (
        "How the person wants to be helped: format, tone, pacing, level of detail, jargon, how much "
        "pushback. Style of help, NOT its content; NOT what they can do (skill_memory) or know "
        "(knowledge_memory)."),
}
FEEDBACK_TYPES = ("correction", "add_context", "too_deep", "too_shallow", "followup", "expose_gap", "satisfied")
MODES = ("dump_all", "retrieve")
DEFAULT_VARIANT = "default"  # the scoring variant of `memaudit score`; rescoring variants have their own names
ATTRIBUTION_LABELS = ("ok", "memory_failure", "task_design_failure", "agent_elicitation_failure",
                      "simulator_too_strict", "no_targeted_task", "unclassified", "overflow")


@dataclass(frozen=True)
class RubricLevel:
    score: float
    name: str
    meaning: str  # what a grader reads: the bundled judge prompt lists it (tests/test_roles.py checks)


@dataclass(frozen=True)
class Rubric:
    """The recovery judge's grid (PROTOCOL §5) and the score from which a target counts as
    recovered: attribution labels it `ok`, utilization calls it known. The judge's check, the
    report's colours and audit page, judge-check's pass marks, the robustness step and the command
    line's help text are derived from it."""
    levels: tuple[RubricLevel, ...]  # best first
    recovered: float

    @property
    def scores(self) -> tuple[float, ...]:
        """The allowed scores, lowest first."""
        return tuple(sorted(level.score for level in self.levels))

    @property
    def top(self) -> float:
        return self.levels[0].score

    @property
    def step(self) -> float:
        """The distance between two neighbouring levels (the grid is even)."""
        scores = self.scores
        return min(high - low for low, high in zip(scores, scores[1:]))

    def below(self, score: float) -> float:
        """The level one below `score`."""
        return max(s for s in self.scores if s < score)

    def on_grid(self, score) -> bool:
        return score in self.scores

    def level(self, score: float) -> RubricLevel:
        """The highest level at or below `score` (a mean falls between levels)."""
        return next(level for level in self.levels if score >= level.score - 1e-9)

    def is_recovered(self, score: float) -> bool:
        return score >= self.recovered


RUBRIC = Rubric((RubricLevel(1.0, "exact", "the same value; nothing important lost."),
                 RubricLevel(0.75, "close", "the same core meaning with a minor detail lost or blurred."),
                 RubricLevel(0.5, "partial", "partly right: one important part matches, another is missing or off."),
                 RubricLevel(0.25, "weak", "only a faint or generic link to the true value."),
                 RubricLevel(0.0, "wrong", 'wrong, contradictory, unrelated, or "unknown".')), recovered=0.75)


@dataclass(frozen=True)
class PoolEntry:
    category: str
    name: str
    axis: str
    answer_space: tuple[str, ...]
    source: str


VERSION_OPS = ("add", "update", "delete")


@dataclass(frozen=True)
class Version:
    """One version of an evolving bank entry (memaudit/bench/history.py): its value from task
    `valid_from_task` (1-based) on; a `delete` says the entry is no longer true."""
    short: str
    valid_from_task: int
    op: str  # add | update | delete
    explanation: str = ""


def versions_until(history: tuple[Version, ...], task_index: int) -> tuple[Version, ...]:
    """The versions of a history that have taken effect by a task: a prefix (versions are in task
    order), so each keeps its position. The one rule of "valid at a task" (memaudit/bench/history.py),
    here so that tables and the report read it too."""
    return tuple(v for v in history if v.valid_from_task <= task_index)


@dataclass(frozen=True)
class BankEntry:
    category: str
    dimension: str
    short: str  # the current value: the last version's short when the entry has a history
    explanation: str
    source: str = ""
    history: tuple[Version, ...] = ()  # empty: a static entry


@dataclass(frozen=True)
class User:
    id: str
    persona: dict
    bank: tuple[BankEntry, ...]

    def entries(self, category: str) -> list[BankEntry]:
        return [e for e in self.bank if e.category == category]


@dataclass(frozen=True)
class Task:
    user_id: str
    index: int  # 1-based, the episode number
    text: str
    target_category: str
    target_dimension: str
    target_short: str
    rationale: str = ""
    review: dict = field(default_factory=dict)  # critic verdicts, editor revisions, pipeline note


@dataclass(frozen=True)
class Benchmark:
    name: str
    users: tuple[User, ...]
    tasks: dict  # user_id -> tuple[Task, ...] in order
    pool: dict | None = None  # category -> list[PoolEntry]
    source: str = ""


@dataclass
class Turn:
    index: int  # 1-based
    assistant: str
    feedback_type: str | None
    user_text: str | None
    preference_score: float | None
    per_pref: list = field(default_factory=list)
    fallback: bool = False  # simulator output stayed invalid: placeholder followup recorded
    change: dict | None = None  # {"dimension", "version"}: the bank change the user disclosed on this turn


@dataclass
class Episode:
    run: str
    user_id: str
    task_index: int
    task: str
    turns: list[Turn]
    end_reason: str  # satisfied | max_turns | failed
    error: str | None = None


@dataclass(frozen=True)
class MemoryOp:
    """One timed memory operation of a rollout (adapters/boundary.py): a write (`op` is the event
    kind) or a read (`search`), its wall time, the model calls it made and how many of them the call
    cache answered. `startup`: the first operation after the system was opened, which also paid
    its one-time start-up (a model loaded, a worker started): timed apart from the others. `alone`:
    no other system or user ran meanwhile (rollout --time-alone, or the embedded model's one at a
    time), so the time is the system's own."""
    op: str
    seconds: float
    calls: int
    cached: int
    startup: bool = False
    alone: bool = False


# What a stored item is (issue 41): the `kind` key of a dump item and of a search result's fields
# (fact, chunk, entity, edge, summary, message, memory, episode, note, …), memaudit's label added at
# the adapter boundary (adapters/base.py `kind_of`); an item without one is counted as UNLABELLED.
# The reader is shown the items as the system gives them, without it (`for_reader`). A snapshot
# state lists under SHORT_TERM_KINDS the kinds its system keeps only until it consolidates them
# (adapters/base.py `short_term_kinds`).
KIND = "kind"
UNLABELLED = "unlabelled"
SHORT_TERM_KINDS = "short_term_kinds"
# A snapshot state's count of the texts its system cut to fit the embedding model (issue 41), and
# the hashes of those texts (each counted once, also across a restore); absent when the embedding
# model's window is not known (adapters/base.py `WindowCount`).
EMBED_TRUNCATED = "embed_truncated"
EMBED_TRUNCATED_TEXTS = "embed_truncated_texts"


def for_reader(item: dict) -> dict:
    """An item as the reader is shown it: the system's own fields, without memaudit's `kind`."""
    return {name: value for name, value in item.items() if name != KIND}


@dataclass(frozen=True)
class MemoryItem:
    id: str
    content: str
    score: float | None = None
    fields: dict = field(default_factory=dict)  # the system's native fields

    def to_json(self) -> dict:
        out = {"id": self.id, "content": self.content, **self.fields}
        if self.score is not None:
            out["score"] = self.score
        return out


# What a deployed library is given of the conversation (`rollout --ingest`): `user`, each user
# message alone, as the published study gave it (the default); `exchange`, each user message with
# the assistant reply before it, through the library's own multi-message add, as its quickstart
# adds a conversation. memaudit's own systems see every event either way.
USER_INGEST, EXCHANGE_INGEST = "user", "exchange"
INGEST_MODES = (USER_INGEST, EXCHANGE_INGEST)


def footprint(items: list[dict]) -> tuple[int, float]:
    """(items, mean characters of their `content`) of a memory dump: what E reports."""
    chars = [len(str(i.get("content", ""))) for i in items]
    return len(items), sum(chars) / len(chars) if chars else 0.0


@dataclass
class Reconstruction:
    run: str
    mode: str
    k: int  # 0 for dump_all
    variant: str  # DEFAULT_VARIANT, or a frozen-rescoring variant name
    user_id: str
    category: str
    dimension: str
    explanation: str
    ground_truth: str
    evidence: dict  # {"items": [...]} for retrieve, {"n_items", "chars"} for dump_all
    label: str | None
    reason: str | None
    score: float | None
    judge_reason: str | None
    status: str  # ok | overflow | failed
    error: str | None = None
    snapshot_task: int | None = None  # the memory read: the user's snapshot after this task
    verdicts: tuple = ()  # a judge panel's verdicts (memaudit/scoring/panel.py Verdict), stored beside the row


@dataclass
class Attribution:
    run: str
    mode: str
    k: int
    variant: str
    user_id: str
    category: str
    dimension: str
    label: str
    score: float | None
    stages: list
    ep_index: int | None
    note: str = ""


EVOLVING_CRITERIA = ("current_present", "stale_absent", "stale_in_store")
STORE_MODE = "store"  # the mode of `stale_in_store` judgments: the full final store, whatever the access mode


@dataclass
class EvolvingJudgment:
    """A yes/no criterion of an evolving target (memaudit/scoring/evolving.py): `current_present` and
    `stale_absent` on a reconstruction of (mode, k); `stale_in_store` on the full store (STORE_MODE)."""
    run: str
    mode: str
    k: int
    variant: str
    user_id: str
    category: str
    dimension: str
    criterion: str
    version: int  # the history position the criterion is about
    verdict: bool | None  # the criterion holds; None unless status is ok
    reason: str
    status: str  # ok | overflow | failed
    error: str | None = None
    snapshot_task: int | None = None
