"""A store recorded by an earlier memaudit still replays: fields a later memaudit added to an
adapter's snapshot state are compared only where the recorded snapshot has them, and a snapshot
without them restores."""
from __future__ import annotations

import asyncio

import orjson

from memaudit.adapters.deployed import ReplayedMessages
from memaudit.replay import _compare

KEY = ("run", "user_id", "task_idx")


def row(state: dict) -> dict:
    return {"run": "graphiti", "user_id": "user_001", "task_idx": 1, "state": orjson.dumps(state).decode(),
            "items": "[]", "n_items": 0, "avg_chars": 0.0}


def test_fields_added_later_are_not_compared_with_a_snapshot_that_lacks_them():
    recorded = {"write_failures": 0, "added": [["task001.turn00", 1, 0, "hi"]]}
    replayed = {**recorded, "added_clocks": [{"uuids": 3}], "tool_requests": 2, "tool_calls": 2}
    assert _compare("snapshots", KEY, [row(recorded)], [row(replayed)]) is None


def test_every_field_the_recorded_snapshot_has_is_still_compared():
    recorded = {"write_failures": 0, "added_clocks": [{"uuids": 3}]}
    replayed = {"write_failures": 1, "added_clocks": [{"uuids": 3}]}
    found = _compare("snapshots", KEY, [row(recorded)], [row(replayed)])
    assert found and "write_failures" in found
    moved = _compare("snapshots", KEY, [row({"added_clocks": [{"uuids": 3}]})], [row({"added_clocks": [{"uuids": 4}]})])
    assert moved and "added_clocks" in moved


class Clock:
    def __init__(self):
        self.state = {"n": 0}

    def to_state(self):
        return dict(self.state)

    def load_state(self, state):
        self.state = dict(state)

    def at(self, event):
        pass


class Library:
    """What ReplayedMessages sits on (a DeployedLibrary): here, one that remembers what it was
    given and the clock it saw."""

    SOURCE = ("task_start", "user")

    def __init__(self, ctx):
        self.clock = Clock()
        self.seen: list[tuple] = []

    async def add(self, event):
        self.seen.append((event.text, self.clock.to_state()))

    def state_header(self) -> dict:
        return {}

    def load_header(self, state: dict) -> None:
        pass


class Stub(ReplayedMessages, Library):
    pass


def test_a_snapshot_from_before_the_clocks_were_kept_restores_and_keeps_its_shape():
    stub = Stub(None)
    old = {"clock": {"n": 7}, "added": [["task001.turn00", 1, 0, "first"], ["task001.turn01", 1, 1, "second"]]}
    asyncio.run(stub.restore(old))
    assert [text for text, _ in stub.seen] == ["first", "second"]
    assert stub.added == old["added"] and stub.added_clocks == [None, None]
    assert stub.clock.to_state() == {"n": 7}
    assert stub.snapshot()["added_clocks"] == [None, None]
