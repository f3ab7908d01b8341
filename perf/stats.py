"""Benchmark: every interval and pairwise test for 50 users × 5 systems × 2 modes (issue 8).

    .venv/bin/python perf/stats.py

Per-user values are drawn directly (no store): per system and mode the B interval and the five
per-category intervals, A and D intervals per system, every pair of systems per mode (paired
bootstrap interval + sign-flip test, Holm per mode) and dump_all vs retrieve within each system,
all with 10,000 resamples. Target: under 5 s on 2 cores.
"""
from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memaudit.tables import stats  # noqa: E402

USERS, SYSTEMS, MODES, CATEGORIES = 50, 5, ("dump_all", "retrieve"), 5
RESAMPLES = 10_000
TARGET_S = 5.0


def main() -> None:
    rng = np.random.default_rng(0)
    users = [f"user_{i:03d}" for i in range(USERS)]
    b = {(s, m): dict(zip(users, rng.normal(0.6 - 0.01 * s - 0.07 * (m == "retrieve"), 0.06, USERS)))
         for s in range(SYSTEMS) for m in MODES}
    per_category = {key: rng.normal(0.6, 0.1, (CATEGORIES, USERS)) for key in b}
    a_d = {s: (rng.uniform(0.9, 1.0, USERS), rng.normal(4.5, 0.2, USERS)) for s in range(SYSTEMS)}

    start = time.perf_counter()
    intervals = tests = 0
    for key, values in b.items():
        stats.bootstrap_ci(list(values.values()), resamples=RESAMPLES)
        for row in per_category[key]:
            stats.bootstrap_ci(row, resamples=RESAMPLES)
        intervals += 1 + CATEGORIES
    for a, d in a_d.values():
        stats.bootstrap_ci(a, resamples=RESAMPLES)
        stats.bootstrap_ci(d, resamples=RESAMPLES)
        intervals += 2
    significant = 0
    families = [[(b[(x, m)], b[(y, m)]) for x, y in itertools.combinations(range(SYSTEMS), 2)] for m in MODES]
    families.append([(b[(s, "dump_all")], b[(s, "retrieve")]) for s in range(SYSTEMS)])
    for family in families:
        ps = []
        for left, right in family:
            _, diffs = stats.paired_diffs(left, right)
            stats.paired_bootstrap_ci(diffs, resamples=RESAMPLES)
            ps.append(stats.sign_flip_p(diffs, resamples=RESAMPLES))
            tests += 1
        significant += sum(p < 0.05 for p in stats.holm(ps))
    elapsed = time.perf_counter() - start

    print(f"{intervals} bootstrap intervals + {tests} paired comparisons (interval + sign-flip test), "
          f"{RESAMPLES:,} resamples each, {USERS} users: {elapsed:.2f} s "
          f"(target < {TARGET_S:.0f} s) -> {'OK' if elapsed < TARGET_S else 'TOO SLOW'}")
    print(f"per interval: {elapsed / (intervals + 2 * tests) * 1000:.1f} ms; "
          f"{significant}/{tests} comparisons survive Holm at 0.05")


if __name__ == "__main__":
    main()
