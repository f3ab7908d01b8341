"""Rendering a rollout's progress events: a rich live table on stderr (per run: users and
episodes done, calls, cache hits, tokens, ETA) or, for logs, one plain line per finished episode."""
from __future__ import annotations

import time
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.table import Table

from memaudit.rollout.events import (EpisodeDone, RolloutEvent, RolloutFinished, RolloutStarted, RunPlanned,
                                       UserDone)


@dataclass
class SystemProgress:
    users_total: int
    episodes_total: int
    users_done: int = 0
    episodes_done: int = 0
    episodes_now: int = 0      # finished in this process (the ETA's rate)
    calls: int = 0
    cache_hits: int = 0
    tokens: int = 0
    failed: int = 0
    fallbacks: int = 0


class RolloutProgress:
    """A progress sink for run_rollout. `mode`: "live" (rich table on stderr) or "log" (plain lines)."""

    def __init__(self, mode: str = "live"):
        self.mode = mode
        self.systems: dict[str, SystemProgress] = {}
        self.console = Console(stderr=True)
        self._live: Live | None = None
        self._started = time.monotonic()

    def __call__(self, event: RolloutEvent) -> None:
        if isinstance(event, RunPlanned):
            self.systems[event.run] = SystemProgress(event.users, event.episodes, event.users_done,
                                                     event.episodes_done)
        elif isinstance(event, RolloutStarted):
            self._start()
        elif isinstance(event, EpisodeDone):
            self._episode_done(event)
        elif isinstance(event, UserDone):
            self.systems[event.run].users_done += 1
            self._refresh()
        elif isinstance(event, RolloutFinished):
            self._stop()

    def _start(self) -> None:
        self._started = time.monotonic()
        if self.mode == "live":
            self._live = Live(self._table(), console=self.console, refresh_per_second=4, transient=False)
            self._live.__enter__()

    def _stop(self) -> None:
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(None, None, None)
            self._live = None
            if not self.console.is_terminal:
                self.console.print()  # a piped log gets the line end a terminal's cursor would give

    def _episode_done(self, event: EpisodeDone) -> None:
        ep = event.episode
        p = self.systems[ep.run]
        p.episodes_done += 1
        p.episodes_now += 1
        p.calls += event.calls
        p.cache_hits += event.cache_hits
        p.tokens += event.tokens
        p.failed += ep.end_reason == "failed"
        p.fallbacks += sum(t.fallback for t in ep.turns)
        if self.mode == "log":
            self.console.print(f"{ep.run} {ep.user_id} task {ep.task_index}: {ep.end_reason} after "
                               f"{len(ep.turns)} turns ({p.episodes_done}/{p.episodes_total} episodes)",
                               highlight=False)
        else:
            self._refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._table())

    def eta(self) -> float | None:
        """Seconds left at this process's rate, over all systems (they run concurrently)."""
        done = sum(p.episodes_now for p in self.systems.values())
        left = sum(p.episodes_total - p.episodes_done for p in self.systems.values())
        if not done:
            return None
        return (time.monotonic() - self._started) / done * left

    def _table(self) -> Table:
        table = Table(title="rollout", title_justify="left")
        for col in ("run", "users", "episodes", "calls", "cache hits", "tokens", "failed", "fallbacks"):
            table.add_column(col, justify="left" if col == "run" else "right")
        for run, p in self.systems.items():
            table.add_row(run, f"{p.users_done}/{p.users_total}", f"{p.episodes_done}/{p.episodes_total}",
                          str(p.calls), str(p.cache_hits), f"{p.tokens:,}", str(p.failed), str(p.fallbacks))
        eta = self.eta()
        table.caption = "ETA " + (f"{eta:,.0f} s" if eta is not None else "—")
        return table
