"""`memaudit demo`: the bundled sample benchmark end to end, sized for the embedded 135M model on
two CPU cores. Every stage is the real one (rollout, scoring in both modes, attribution, tables,
report); only the size is cut, and every table says so (`partial`). The embedded model's output
caps (memaudit/config.py) are demo-only settings: the protocol the demo runs is the full one."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memaudit.bench.instances import resolve_bench
from memaudit.config import EMBEDDED_REPAIR_ATTEMPTS, EMBEDDED_SIMULATOR_TEXT_CHARS
from memaudit.report.view import write_report
from memaudit.roles import embedded_max_tokens
from memaudit.rollout.events import ProgressSink
from memaudit.rollout.runner import run_rollout
from memaudit.runtime import Runtime
from memaudit.scoring.attribution import attribute_runs
from memaudit.scoring.evolving import score_evolving
from memaudit.scoring.recovery import score_runs
from memaudit.tables.paper import compute_tables

DEMO_SYSTEMS = ("nomem", "longctx_full", "mem0", "amem")
MODES = ("dump_all", "retrieve")


@dataclass(frozen=True)
class DemoSize:
    # Two users keep `make run` within 15 minutes on two cores: each user costs the embedded model
    # about 5 minutes (perf/demo.py prints the time per role).
    users: int = 2
    tasks: int = 1
    max_turns: int = 2
    systems: tuple[str, ...] = DEMO_SYSTEMS

    def cuts(self, n_users: int, n_tasks: int, *, embedded: bool) -> str:
        """What this demo leaves out, in one sentence; the embedded model's output caps are listed
        when it served the demo (they never apply to a configured endpoint)."""
        size = (f"{self.users} of {n_users} users, the first {self.tasks} of {n_tasks} tasks each, at most "
                f"{self.max_turns} assistant replies per episode (the protocol allows 25), and only the bank "
                f"entries whose task ran are scored (--dims targeted)")
        return f"{size}; {embedded_caps()}" if embedded else size


def embedded_caps() -> str:
    caps = ", ".join(f"{role} {tokens}" for role, tokens in embedded_max_tokens().items())
    repairs = f"{EMBEDDED_REPAIR_ATTEMPTS} repair attempt(s)" if EMBEDDED_REPAIR_ATTEMPTS else "no repair attempt"
    return (f"the embedded model's replies are capped (max tokens: {caps}) and the simulated user's messages at "
            f"{EMBEDDED_SIMULATOR_TEXT_CHARS} characters, where the published runner set no caps; an invalid "
            f"structured answer gets {repairs} before it is recorded as a failure")


async def run_demo(rt: Runtime, size: DemoSize, report_dir: Path, *, progress: ProgressSink | None = None) -> dict:
    bench = await resolve_bench(rt.store, "sample")
    users = [u.id for u in bench.users[:size.users]]
    runs = await run_rollout(rt, bench, list(size.systems), users=users, tasks=size.tasks,
                             max_turns=size.max_turns, tag="demo", progress=progress)
    await score_runs(rt, runs, MODES, ks=(5,), dims="targeted")
    await score_evolving(rt, runs, MODES, ks=(5,))
    await attribute_runs(rt, runs, MODES)
    tables = await compute_tables(rt.store, runs)
    await write_report(rt.store, report_dir, runs)
    return {"bench": bench, "runs": runs, "tables": tables}
