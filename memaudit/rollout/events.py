"""Progress of a rollout as plain events. The runner hands each one to the `progress` callable it
was given; rendering them (a live table, log lines) is the command line's business."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from memaudit.types import Episode


@dataclass(frozen=True)
class RunPlanned:
    """A run is about to start (or resume): its size and what earlier processes already did."""
    run: str
    users: int
    episodes: int
    episodes_done: int
    users_done: int


@dataclass(frozen=True)
class RolloutStarted:
    """Every run is planned; episodes start now."""


@dataclass(frozen=True)
class EpisodeDone:
    """An episode was committed with its snapshot: the calls it made and their tokens."""
    episode: Episode
    calls: int
    cache_hits: int
    tokens: int


@dataclass(frozen=True)
class UserDone:
    run: str


@dataclass(frozen=True)
class RolloutFinished:
    """The episodes stopped: all done, or a failure is on its way up."""


RolloutEvent = Union[RunPlanned, RolloutStarted, EpisodeDone, UserDone, RolloutFinished]
ProgressSink = Callable[[RolloutEvent], None]
