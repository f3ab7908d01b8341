"""Teacher-forced rollout: audit a memory system on recorded transcripts (`rollout --transcripts RUN`).

In the live loop every system's replies change what the simulated user says next, so transcripts
diverge between systems. A teacher-forced run instead replays the episodes of one recorded run
(ours, or a published one brought in with `import-release`) into a memory system's write path,
event by event in the live order — `feed_transcript`, i.e. `EpisodeMemory`: task start; per turn
the system's `context()` read with the latest user message, the recorded reply, the recorded user
message; the episode end. Systems whose writes depend on their reads behave as live. No assistant,
simulator or preference judge is called, only the memory system's own calls.

The run's episodes and turns are the recorded ones, so A, C and D are the source run's, and every
system replayed over one source saw exactly the same evidence: paired comparisons between them are
the controlled comparison. The run records where its transcripts came from (RunConfig.transcripts)
and a digest of the episodes replayed (its provenance's `teacher_forced`), so a resume over another
or a changed source is refused like any other change of configuration."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from memaudit.adapters.base import MemoryAdapter
from memaudit.config import Settings
from memaudit.errors import BadInput
from memaudit.llm.keys import text_hash
from memaudit.provenance import teacher_forced_provenance
from memaudit.rollout.episode import feed_transcript
from memaudit.store import RunConfig, Store, dumps
from memaudit.types import Benchmark, Episode, Task


def default_tag(source: str) -> str:
    """Without --tag a teacher-forced run is `<system>_tf_<source>`: never the source run itself,
    nor a live run of the same system."""
    return f"tf_{source}"


@dataclass(frozen=True)
class Transcripts:
    """The recorded episodes a teacher-forced run replays."""
    source: str
    source_config: RunConfig
    episodes: dict  # user_id -> {task index -> recorded Episode}
    plan: dict  # user_id -> [Task] to replay, in order, with the task text as recorded
    tasks: int | None  # the first N tasks per user, None = all the source recorded

    @property
    def users(self) -> list[str]:
        return list(self.plan)

    def digest(self) -> str:
        """What was replayed, episode by episode: a resume over a source whose transcripts changed
        (re-imported, or resumed with other episodes) is refused."""
        rows = [[user, task.index, _digestible(self.episodes[user][task.index])]
                for user, tasks in self.plan.items() for task in tasks]
        return text_hash(dumps(rows))

    def run_config(self, settings: Settings, *, k: int, tag: str) -> RunConfig:
        """What the run records: the episodes are the source's, so are its users, tasks and turn cap."""
        return RunConfig(self.users, self.tasks, self.source_config.max_turns, k, tag, transcripts=self.source,
                         provenance=teacher_forced_provenance(settings, self.digest()))

    async def feed(self, adapter: MemoryAdapter, run: str, task: Task, *, k: int) -> Episode:
        """Feed one recorded episode to the adapter; returns it as an episode of `run`."""
        recorded = self.episodes[task.user_id][task.index]
        await feed_transcript(adapter, task, recorded.turns, k=k)
        return replace(recorded, run=run)


def _digestible(ep: Episode) -> dict:
    """The episode as digested: a turn without a bank change (every turn of a static bank) has no
    `change` key, so digests of static runs are what they were before evolving banks existed."""
    record = asdict(ep)
    for turn in record["turns"]:
        if turn["change"] is None:
            del turn["change"]
    return record


async def load_transcripts(store: Store, source: str, bench: Benchmark, *, users: list[str] | None = None,
                           tasks: int | None = None) -> Transcripts:
    """The episodes of `source` to replay: every recorded user (or `users`), each user's recorded
    episodes among the benchmark's first `tasks` tasks, in task order."""
    run = await store.runs.get(source)
    if run is None:
        raise BadInput(f"no run {source!r} in the store to take transcripts from", field="transcripts")
    if run.bench != bench.name:
        raise BadInput(f"run {source!r} was recorded on benchmark {run.bench!r}, not {bench.name!r}",
                       field="transcripts")
    forced_from = run.config.transcripts
    if forced_from is not None:
        raise BadInput(f"run {source!r} is itself teacher-forced on the transcripts of {forced_from!r}; use that run",
                       field="transcripts")
    recorded: dict[str, dict[int, Episode]] = {}
    for ep in await store.episodes.load(source):
        recorded.setdefault(ep.user_id, {})[ep.task_index] = ep
    if not recorded:
        raise BadInput(f"run {source!r} has no recorded episodes", field="transcripts")
    if users is None:
        users = [u.id for u in bench.users if u.id in recorded]
    missing = [u for u in users if u not in recorded]
    if missing:
        raise BadInput(f"run {source!r} has no episodes for this user", user=missing[0], field="users")
    plan = {}
    for user in dict.fromkeys(users):
        wanted = list(bench.tasks.get(user, ()))[:tasks]
        plan[user] = [replace(t, text=recorded[user][t.index].task or t.text)
                      for t in wanted if t.index in recorded[user]]
        if not plan[user]:
            raise BadInput(f"run {source!r} recorded none of the first {tasks} tasks", user=user, field="tasks")
    limits = [n for n in (tasks, run.config.tasks) if n is not None]
    return Transcripts(source, run.config, recorded, plan, min(limits) if limits else None)
