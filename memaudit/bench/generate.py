"""`memaudit generate`: new benchmark users, persona -> bank -> tasks, through the model client.

Per user (users run concurrently, each user's steps in order):
1. persona: a schema'd profile, seeded with spread-out starting facts (age group, region, work);
2. bank: per category, exactly the required number of entries picked from the dimension pool;
   names, duplicates, the 15-word short and the 2-4 sentence explanation are checked in code and
   a failed check goes back to the model (the client's repair loop, then fresh samples);
3. tasks: one per bank entry, each written knowing the user's earlier tasks and unused scenes;
   then a blind critic (task text and category only) and, when it says "fishing", an editor
   rewrite. The default is the published generator's way (PROTOCOL.md §11): tasks in category
   blocks in bank order, each prompt carrying a hint on how that kind of fact surfaces in ordinary
   help, and one critic -> editor pass. `GenerationOptions` keeps memaudit's earlier way as
   options: categories interleaved, no hints, edited tasks re-reviewed up to N edits. Every verdict
   and revision is kept in the task record.
Finished users are saved one file each under <out>/generation/ (resume skips them); the release
layout is written from those files at the end and read back through the validator.
"""
from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import anyio

from memaudit.ask import ask
from memaudit.bench.evolve import bank_record, change_check, check_count, pick_entries, write_change
from memaudit.bench.export import EXPORT_TASKS_DIR, write_benchmark
from memaudit.bench.files import read_json, write_json
from memaudit.bench.history import parse_history
from memaudit.bench.instances import TASKS_ROOT, read_release
from memaudit.bench.pool import load_pool
from memaudit.canonical import canonical_pretty
from memaudit.errors import BadInput, InvalidOutput, MemauditError
from memaudit.llm.keys import derive_seed
from memaudit.roles import BANK_GEN, CRITIC, EDITOR, GENERATOR, PERSONA_GEN, TASK_GEN
from memaudit.types import BANK_COUNTS, CATEGORIES, CATEGORY_DEFINITIONS, BankEntry, Benchmark, PoolEntry, Task, User

WORK_DIR = "generation"          # per-user records of finished users: what resume looks at
BANK_SAMPLES = 3                 # fresh samples per category once the client's repair budget is spent
SHORT_MAX_WORDS = 15
SCENES = ("household", "health", "finance", "travel", "shopping", "social", "tech", "hobbies", "food",
          "work", "transport")

AGE_GROUPS = ("18-24", "25-34", "35-44", "45-54", "55-64", "65-74", "75-84")
REGIONS = ("the Pacific Northwest", "California", "the Mountain West", "the Southwest", "Texas",
           "the Great Plains", "the Upper Midwest", "the Great Lakes region", "the Deep South", "Appalachia",
           "Florida", "the Mid-Atlantic", "New England", "Alaska or Hawaii")
WORK = ("a skilled trade", "health care", "teaching", "retail or food service", "office administration",
        "farming or ranching", "software or IT", "trucking or logistics", "public service", "arts or media",
        "running a small business", "studying", "retired", "caring for family at home", "manufacturing",
        "science or engineering")

STR = {"type": "string", "minLength": 1}
ORDERS = ("blocks", "interleaved")

# How evidence for each category tends to come out when someone is simply being helped: the task
# writer gets the hint for its target's category (published generator's behaviour, our words).
CATEGORY_HINTS = {
    "skill_memory": "Pick a hands-on job near the limit of what this person can do. Their replies will show it: "
                    "which steps they take in stride, which they push back on or get stuck at, and which "
                    "practical constraints from their own experience they add.",
    "knowledge_memory": "Touch a subject the person knows well, knows little about, or gets wrong. How they react "
                        "to the assistant's first answer (correcting it, building on it, or taking a mistaken idea "
                        "for granted) shows what they know.",
    "episodic_memory": "Put the person in a present-day situation that resembles the past event, so that telling "
                       "the assistant that something like this happened to them before comes naturally. Never "
                       "mention the event itself in the message.",
    "self_model": "Choose a request where an ordinary answer would quietly agree or disagree with how the person "
                  "sees themselves, so that they confirm, object or correct it, and the self-image shows.",
    "assistance_preference": "Leave room for the person to react to the assistant's way of helping (its length, "
                             "tone, pace, format or amount of detail), so the preference comes out as a correction "
                             "or a request to do it differently.",
}


@dataclass(frozen=True)
class GenerationOptions:
    """How tasks are generated. The defaults are the published generator's; memaudit's earlier way
    is `GenerationOptions("interleaved", hints=False, edits=3, recheck=True)`."""
    order: str = "blocks"      # blocks: categories one after another in bank order; interleaved: in turn
    hints: bool = True         # give the task writer the category's hint (CATEGORY_HINTS)
    edits: int = 1             # editor rewrites per task at most
    recheck: bool = False      # review each rewrite again (needed for more than one edit)
    evolving: int = 0          # entries per user that change at a later task (memaudit/bench/evolve.py)

    def __post_init__(self):
        if self.order not in ORDERS:
            raise BadInput(f"unknown task order {self.order!r}; choose one of {', '.join(ORDERS)}", field="order")
        if self.edits < 0:
            raise BadInput("--edits must be at least 0", field="edits")
        if self.edits > 1 and not self.recheck:
            raise BadInput("more than one edit needs --recheck: without a new review nothing asks for a "
                           "second edit", field="edits")
        check_count(self.evolving)

    def describe(self) -> str:
        review = "each rewrite re-reviewed" if self.recheck else "rewrites not re-reviewed"
        evolving = f", {self.evolving} evolving entries per user" if self.evolving else ""
        return (f"tasks {self.order}, {'with' if self.hints else 'no'} category hints, "
                f"at most {self.edits} edit(s), {review}{evolving}")


def _strings(lo: int, hi: int) -> dict:
    return {"type": "array", "items": STR, "minItems": lo, "maxItems": hi}


def _object(**props) -> dict:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


PERSONA_SCHEMA = _object(age={"type": "integer", "minimum": 18, "maximum": 99}, age_group=STR, gender=STR,
                         location=STR, career=STR, status=STR, values=_strings(3, 6), life_attitude=STR,
                         coping_style=STR, personal_stories=_strings(2, 4), interests=_strings(3, 6))
TASK_SCHEMA = _object(task=STR, rationale=STR, scene={"type": "string", "enum": list(SCENES)})


def bank_schema(category_pool: list[PoolEntry], count: int) -> dict:
    entry = _object(dimension={"type": "string", "enum": [p.name for p in category_pool]}, short=STR,
                    explanation=STR)
    return _object(entries={"type": "array", "items": entry, "minItems": count, "maxItems": count})


@dataclass
class GenerationReport:
    written: list[str] = field(default_factory=list)      # users in the release, in order
    generated: list[str] = field(default_factory=list)    # users made by this invocation
    resumed: list[str] = field(default_factory=list)      # users found finished and skipped
    failures: dict[str, str] = field(default_factory=dict)
    edits: int = 0                                        # editor rewrites over all new tasks
    still_fishing: int = 0                                # tasks kept after the budget was spent
    problems: list[str] = field(default_factory=list)     # validator findings on the written release


# -- checks done in code (fed back to the model as a problem sentence) ------------------------------
def sentences(text: str) -> int:
    return len([s for s in re.split(r"(?<=[.!?])[\"')\]]*\s+", text.strip()) if s.strip()])


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def bank_check(category: str, count: int, names: set[str], taken: set[str]) -> Callable[[dict], str | None]:
    def check(data: dict) -> str | None:
        entries = data["entries"]
        if len(entries) != count:
            return f"give exactly {count} entries, not {len(entries)}"
        seen: set[str] = set()
        for i, e in enumerate(entries):
            name = e["dimension"]
            if name not in names:
                return f"entries[{i}].dimension {name!r} is not in the list for {category}; copy a name exactly"
            if name in seen or name in taken:
                return f"entries[{i}].dimension {name!r} is used twice; pick {count} different dimensions"
            seen.add(name)
            n = len(words(e["short"]))
            if n > SHORT_MAX_WORDS:
                return f"entries[{i}].short has {n} words; use at most {SHORT_MAX_WORDS}"
            s = sentences(e["explanation"])
            if not 2 <= s <= 4:
                return f"entries[{i}].explanation has {s} sentence(s); write 2 to 4 sentences"
        return None
    return check


PROBES = re.compile(r"\b(what (am i|are you|i'm) (good|bad) at|tell me about a time|how do (i|you) (like|prefer)|"
                    r"ask me (about|what)|my (strengths|weaknesses)|describe (myself|me|yourself)|"
                    r"remember when i|do you know me)\b", re.I)


def task_check(entry: BankEntry) -> Callable[[dict], str | None]:
    name_phrase = " ".join(words(entry.dimension.replace("_", " ")))
    short_words = words(entry.short)
    short_grams = {" ".join(short_words[i:i + 4]) for i in range(len(short_words) - 3)}

    def check(data: dict) -> str | None:
        text = data["task"]
        n = sentences(text)
        if not 1 <= n <= 3:
            return f"the task has {n} sentences; write 1 to 3"
        flat = " ".join(words(text))
        if name_phrase and name_phrase in flat:
            return f"the task uses the words of the hidden dimension ({name_phrase!r}); describe a situation instead"
        task_words = flat.split()
        grams = {" ".join(task_words[i:i + 4]) for i in range(len(task_words) - 3)}
        if grams & short_grams:
            return "the task repeats words of the hidden answer; the person must reveal it only in later replies"
        if PROBES.search(text):
            return "the task asks about the person directly; ask for help with a situation instead"
        return None
    return check


# -- one user ------------------------------------------------------------------------------------
def persona_hints(seed: int, index: int) -> str:
    """Starting facts for the index-th user: a seeded rotation through age groups, regions and kinds
    of work, so a batch of users spreads out instead of collapsing onto one typical person."""
    picks = []
    for label, options in (("age group", AGE_GROUPS), ("region", REGIONS), ("work", WORK)):
        order = list(options)
        random.Random(derive_seed(seed, "persona_hints", label)).shuffle(order)
        picks.append(f"- {label}: {order[index % len(order)]}")
    return "\n".join(picks)


def interleave(bank: list[BankEntry]) -> list[BankEntry]:
    """Task order: categories in turn (skill, knowledge, episodic, self, assistance, skill, ...)."""
    by_cat = {c: [e for e in bank if e.category == c] for c in CATEGORIES}
    out = []
    for r in range(max(BANK_COUNTS.values())):
        out.extend(by_cat[c][r] for c in CATEGORIES if r < len(by_cat[c]))
    return out


def in_blocks(bank: list[BankEntry]) -> list[BankEntry]:
    """Task order as published: every entry of a category before the next, in bank order."""
    return [e for c in CATEGORIES for e in bank if e.category == c]


def hint_block(category: str, options: GenerationOptions) -> str:
    if not options.hints:
        return ""
    return f"How this kind of fact tends to come out while someone is being helped: {CATEGORY_HINTS[category]}\n\n"


class UserGenerator:
    def __init__(self, rt, pool: dict[str, list[PoolEntry]], user_id: str, index: int,
                 options: GenerationOptions = GenerationOptions()):
        self.llm, self.pool, self.uid, self.index, self.options = rt.llm, pool, user_id, index, options
        self.stage = "persona"
        self.edits = 0
        self.still_fishing = 0

    async def run(self) -> dict:
        persona = await self.persona()
        self.stage = "bank"
        bank = await self.bank(persona)
        self.stage = "tasks"
        tasks = await self.tasks(persona, bank)
        reviews = None
        if self.options.evolving:
            self.stage = "changes"
            bank, reviews = await self.changes(persona, bank, tasks)
        record = {"user_id": self.uid, "persona": persona, "bank": [bank_record(e) for e in bank],
                  "tasks": tasks, "generation": self.options.describe()}
        return record if reviews is None else {**record, "change_reviews": reviews}

    async def changes(self, persona: dict, bank: list[BankEntry], tasks: list[dict]) -> tuple[list, dict]:
        """The bank with `evolving` entries changed at a later task, and every review of a change."""
        task_of = {t["target_dimension"]: i for i, t in enumerate(tasks, start=1)}
        picked = pick_entries(bank, task_of, len(tasks), self.options.evolving, self.llm.settings.seed, self.uid)
        changed, reviews = {}, {}
        for entry, task in picked:
            check = change_check(entry, words, sentences, SHORT_MAX_WORDS)
            new, reviews[entry.dimension] = await write_change(self.llm, self.uid, _json(persona), entry, task,
                                                               len(tasks), check)
            if new is not None:
                changed[entry.dimension] = new
        return [changed.get(e.dimension, e) for e in bank], reviews

    async def persona(self) -> dict:
        result = await ask(self.llm, PERSONA_GEN, schema=PERSONA_SCHEMA, seed_parts=(self.uid,),
                           user_id=self.uid, hints=persona_hints(self.llm.settings.seed, self.index))
        return result.data

    async def bank(self, persona: dict) -> list[BankEntry]:
        bank: list[BankEntry] = []
        persona_text = _json(persona)
        for category in CATEGORIES:
            options = self.pool[category]
            count = BANK_COUNTS[category]
            taken = {e.dimension for e in bank}
            chosen = "\n".join(f"- {e.category}/{e.dimension}: {e.short}" for e in bank) or "none yet"
            listing = "\n".join(f"{p.name} — {p.axis}" for p in options if p.name not in taken)
            check = bank_check(category, count, {p.name for p in options}, taken)
            data = None
            for sample in range(BANK_SAMPLES):
                try:
                    result = await ask(self.llm, BANK_GEN, schema=bank_schema(options, count), check=check,
                                       sample=sample, seed_parts=(self.uid, category), persona=persona_text,
                                       category=category, definition=CATEGORY_DEFINITIONS[category], count=count,
                                       dimensions=listing, chosen=chosen)
                except InvalidOutput:
                    if sample == BANK_SAMPLES - 1:
                        raise
                    continue
                data = result.data
                break
            source = {p.name: p.source for p in options}
            bank += [BankEntry(category, e["dimension"], e["short"].strip(), e["explanation"].strip(),
                               source[e["dimension"]]) for e in data["entries"]]
        return bank

    async def tasks(self, persona: dict, bank: list[BankEntry]) -> list[dict]:
        persona_text = _json(persona)
        axes = {p.name: p.axis for entries in self.pool.values() for p in entries}
        records: list[dict] = []
        order = in_blocks if self.options.order == "blocks" else interleave
        for idx, entry in enumerate(order(bank), start=1):
            used = [r["scene"] for r in records]
            earlier = "\n".join(f"- [{r['scene']}] {r['task']}" for r in records) or "none yet"
            fresh = ", ".join(s for s in SCENES if s not in used) or "all scenes used; pick the best fit"
            target = dict(persona=persona_text, category=entry.category,
                          definition=CATEGORY_DEFINITIONS[entry.category], dimension=entry.dimension,
                          axis=axes.get(entry.dimension, ""), short=entry.short)
            result = await ask(self.llm, TASK_GEN, schema=TASK_SCHEMA, check=task_check(entry),
                               seed_parts=(self.uid, idx), explanation=entry.explanation, earlier=earlier,
                               fresh_scenes=fresh, hint=hint_block(entry.category, self.options), **target)
            records.append(await self.review(idx, entry, result.data, target))
        return records

    async def review(self, idx: int, entry: BankEntry, draft: dict, target: dict) -> dict:
        """Critic -> editor. Without recheck (published): one review, and one rewrite if it says
        fishing. With recheck: every rewrite is reviewed again, up to `edits` rewrites. Returns the
        task record with every verdict and revision."""
        text, rationale = draft["task"], draft["rationale"]
        budget = self.options.edits
        verdicts: list[dict] = []
        revisions: list[dict] = []
        note = ""
        for round_ in range(budget + 1):
            if round_ > 0 and not self.options.recheck:
                note = f"edited {round_} time(s) after a fishing verdict; the rewrite was not reviewed again"
                break
            critic = await ask(self.llm, CRITIC, seed_parts=(self.uid, idx, round_), task=text,
                               category=entry.category, definition=CATEGORY_DEFINITIONS[entry.category])
            verdicts.append({"round": round_, **critic.data})
            if critic.data["verdict"] == "neutral":
                note = "neutral at first review" if round_ == 0 else f"neutral after {round_} edit(s)"
                break
            if round_ == budget:
                note = f"budget spent: still fishing after {budget} edit(s); last version kept"
                self.still_fishing += 1
                break
            critique = f"guessed trait: {critic.data['guessed_trait']}; {critic.data['reason']}"
            try:
                edited = await ask(self.llm, EDITOR, check=task_check(entry), seed_parts=(self.uid, idx, round_),
                                   task=text, critique=critique, **target)
            except InvalidOutput as exc:
                revisions.append({"round": round_ + 1, "error": exc.problem})
                note = f"editor output invalid ({exc.problem}); last version kept, still fishing"
                self.still_fishing += 1
                break
            self.edits += 1
            text, rationale = edited.data["task"], edited.data["rationale"]
            revisions.append({"round": round_ + 1, "task": text, "rationale": rationale})
        record = {"task": text, "rationale": rationale, "target_category": entry.category,
                  "target_dimension": entry.dimension, "target_short": entry.short,
                  "scene": draft["scene"], "critic_verdicts": verdicts, "pipeline_note": note}
        if revisions:
            record["revisions"] = revisions
            record["original_task"] = draft["task"]
        return record


# -- the whole batch -----------------------------------------------------------------------------
def user_ids(n: int) -> list[str]:
    return [f"user_{i:03d}" for i in range(1, n + 1)]


async def generate(rt, n_users: int, out_dir: str | Path, *, tasks_dir: str = EXPORT_TASKS_DIR,
                   pool_path: str | Path | None = None, options: GenerationOptions = GenerationOptions(),
                   progress: Callable[[str, str], None] | None = None) -> GenerationReport:
    """Generate (or resume) `n_users` users into `out_dir` in the release layout. The options are
    recorded in the benchmark's source line."""
    if n_users < 1:
        raise BadInput("--users must be at least 1", field="users")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", tasks_dir):
        raise BadInput(f"not a plain directory name: {tasks_dir!r}", field="tasks-dir")
    out = Path(out_dir)
    work = out / WORK_DIR
    pool = load_pool(pool_path)
    report = GenerationReport()
    say = progress or (lambda user, message: None)
    ids = user_ids(n_users)
    records: dict[str, dict] = {}
    for uid in ids:
        if (work / f"{uid}.json").exists():
            records[uid] = read_json(work / f"{uid}.json", f"{WORK_DIR}/{uid}.json")
            report.resumed.append(uid)

    async def one(index: int, uid: str) -> None:
        gen = UserGenerator(rt, pool, uid, index, options)
        try:
            record = await gen.run()
        except MemauditError as exc:
            report.failures[uid] = f"{gen.stage}: {exc}"
            say(uid, f"failed at {gen.stage}: {exc}")
            return
        _write_atomic(work / f"{uid}.json", record)
        records[uid] = record
        report.generated.append(uid)
        report.edits += gen.edits
        report.still_fishing += gen.still_fishing
        say(uid, f"done: {len(record['tasks'])} tasks, {gen.edits} edit(s)")

    async with anyio.create_task_group() as tg:
        for index, uid in enumerate(ids):
            if uid not in records:
                tg.start_soon(one, index, uid)

    report.generated.sort()
    report.written = [uid for uid in ids if uid in records]
    if report.written:
        bench = _benchmark(out.resolve().name, [records[u] for u in report.written], pool,
                           f"memaudit generate (model {rt.llm.settings.role(GENERATOR).model}, "
                           f"seed {rt.llm.settings.seed}; {options.describe()})")
        _write_release(bench, out, tasks_dir)
        report.problems = read_release(out, tasks_dir=tasks_dir)[1]
    return report


def _benchmark(name: str, records: list[dict], pool, source: str) -> Benchmark:
    users, tasks = [], {}
    for r in records:
        bank = tuple(BankEntry(e["category"], e["dimension"], e["short"], e["explanation"], e.get("source", ""),
                               parse_history(e.get("history"), f"{WORK_DIR}/{r['user_id']}.json")[0])
                     for e in r["bank"])
        users.append(User(r["user_id"], r["persona"], bank))
        tasks[r["user_id"]] = tuple(
            Task(r["user_id"], i, t["task"], t["target_category"], t["target_dimension"], t["target_short"],
                 t["rationale"], {k: v for k, v in t.items() if k not in
                                  ("task", "rationale", "target_category", "target_dimension", "target_short")})
            for i, t in enumerate(r["tasks"], start=1))
    return Benchmark(name, tuple(users), tasks, pool, source)


def _write_release(bench: Benchmark, out: Path, tasks_dir: str) -> None:
    """The release layout via the shared writer; the task files then move to the chosen directory."""
    write_benchmark(bench, out)
    if tasks_dir == EXPORT_TASKS_DIR:
        return
    written, target = out / TASKS_ROOT / EXPORT_TASKS_DIR, out / TASKS_ROOT / tasks_dir
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(written.glob("*.json")):
        os.replace(path, target / path.name)
    written.rmdir()


def _write_atomic(path: Path, data) -> None:
    tmp = path.with_suffix(".json.tmp")
    write_json(tmp, data)
    os.replace(tmp, path)


def _json(value) -> str:
    return canonical_pretty(value).decode()
