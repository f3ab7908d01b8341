"""A tiny benchmark, a fast fake encoder and a runtime on the fake server, for rollout tests."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from memaudit.llm.embed import DIM, Embedder
from memaudit.runtime import open_runtime
from memaudit.types import BANK_COUNTS, BankEntry, Benchmark, Task, User


def fake_encoder(texts: list[str]) -> np.ndarray:
    rows = []
    for text in texts:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")
        v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        rows.append(v / np.linalg.norm(v))
    return np.stack(rows)


def make_bench(n_users: int = 2, n_tasks: int = 3, name: str = "tiny") -> Benchmark:
    users, tasks = [], {}
    for u in range(1, n_users + 1):
        uid = f"user_{u:03d}"
        bank = tuple(BankEntry(cat, f"{cat}_dim_{i}", f"stance {i} of {uid}", f"Why {uid} holds stance {i}.")
                     for cat, count in BANK_COUNTS.items() for i in range(count))
        users.append(User(uid, {"name": f"Person {u}", "age": 30 + u}, bank))
        tasks[uid] = tuple(Task(uid, i, f"{uid} needs help with chore {i}.", bank[i].category, bank[i].dimension,
                                bank[i].short) for i in range(1, n_tasks + 1))
    return Benchmark(name, tuple(users), tasks)


@pytest.fixture
def bench():
    return make_bench()


@pytest.fixture
def open_rt(settings, fake):
    """`async with open_rt() as rt:` a runtime on the fake server with the fake encoder."""
    def opener(s=None, transport=None):
        return open_runtime(s or settings, transport=transport or fake.transport(),
                            embedder=Embedder(None, encoder=fake_encoder))
    return opener
