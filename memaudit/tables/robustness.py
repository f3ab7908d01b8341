"""Frozen-rescoring robustness (`tables --compare VARIANT`, PROTOCOL §8).

A variant re-judges the same predictions (another judge model or prompt wording). We compare it
with the baseline on the targets both scored — same (run, mode, k, user, dimension) — and ask
whether the conclusions survive: target-level agreement, the mean shift, and whether the system
and category orderings are preserved.

Scores follow B's rules: `overflow` counts 0, `failed` (or a missing score) is left out.
"""
from __future__ import annotations

import itertools

from memaudit.errors import BadInput
from memaudit.store import Store
from memaudit.tables import stats
from memaudit.tables.metrics import counted_score, user_recovery
from memaudit.types import CATEGORIES, DEFAULT_VARIANT, RUBRIC

TOLERANCE = 1e-9


async def compare_variants(store: Store, runs: list[str], variant: str, *, baseline: str = DEFAULT_VARIANT) -> dict:
    if not runs:
        raise BadInput("no runs to compare", field="runs")
    rows = await store.scores.paired_rows(runs, baseline, variant)
    pairs = [(r, counted_score(r["st0"], r["s0"]), counted_score(r["st1"], r["s1"])) for r in rows]
    pairs = [(r, a, b) for r, a, b in pairs if a is not None and b is not None]
    if not pairs:
        raise BadInput(f"variant {variant!r} shares no scored target with {baseline!r} in runs {', '.join(runs)}",
                       field="compare")
    deltas = [b - a for _, a, b in pairs]

    # (mode, k) -> run -> user -> [(category, score, status)] under each variant
    grouped: dict[tuple, dict[str, dict[str, tuple[list, list]]]] = {}
    for r, a, b in pairs:
        per_user = grouped.setdefault((r["mode"], r["k"]), {}).setdefault(r["run"], {})
        base_rows, var_rows = per_user.setdefault(r["user_id"], ([], []))
        base_rows.append((r["category"], a, "ok"))
        var_rows.append((r["category"], b, "ok"))

    modes, system_pairs, category_pairs, paired = [], [], [], []
    for (mode, k), by_run in sorted(grouped.items()):
        system_b = {side: {} for side in (0, 1)}
        category_b = {side: {} for side in (0, 1)}  # side -> run -> category -> mean over users
        for run, users in sorted(by_run.items()):
            for side in (0, 1):
                recs = [user_recovery(u, rs[side]) for u, rs in sorted(users.items())]
                b_values = [r.B for r in recs if r.B is not None]
                system_b[side][run] = sum(b_values) / len(b_values)
                category_b[side][run] = {c: _mean([r.categories[c] for r in recs]) for c in CATEGORIES}
        paired.extend(paired_runs(mode, k, system_b_users(by_run)))
        for x, y in itertools.combinations(sorted(by_run), 2):
            system_pairs.append(_same_order(system_b[0][x] - system_b[0][y], system_b[1][x] - system_b[1][y]))
        for run in sorted(by_run):
            cats = [c for c in CATEGORIES if category_b[0][run][c] is not None]
            for c1, c2 in itertools.combinations(cats, 2):
                category_pairs.append(_same_order(category_b[0][run][c1] - category_b[0][run][c2],
                                                  category_b[1][run][c1] - category_b[1][run][c2]))
        pooled = {side: {c: _mean([category_b[side][run][c] for run in by_run]) for c in CATEGORIES}
                  for side in (0, 1)}
        best = {side: max(sorted(system_b[side]), key=lambda run: system_b[side][run]) for side in (0, 1)}
        hardest = {side: _extreme(pooled[side], min) for side in (0, 1)}
        easiest = {side: _extreme(pooled[side], max) for side in (0, 1)}
        modes.append({"mode": mode, "k": k if mode == "retrieve" else None, "runs": len(by_run),
                      "best_default": best[0], "best_variant": best[1], "best_preserved": best[0] == best[1],
                      "hardest_default": hardest[0], "hardest_variant": hardest[1],
                      "hardest_preserved": hardest[0] == hardest[1],
                      "easiest_default": easiest[0], "easiest_variant": easiest[1],
                      "easiest_preserved": easiest[0] == easiest[1]})

    return {"variant": variant, "baseline": baseline, "targets": len(pairs),
            "exact_agreement": sum(abs(d) < TOLERANCE for d in deltas) / len(deltas),
            "within_one_level": sum(abs(d) <= RUBRIC.step + TOLERANCE for d in deltas) / len(deltas),
            "mean_shift": sum(deltas) / len(deltas),
            "system_pairs": len(system_pairs),
            "system_pairs_preserved": _fraction(system_pairs),
            "category_pairs": len(category_pairs),
            "category_pairs_preserved": _fraction(category_pairs),
            "modes": modes, "runs": paired}


def system_b_users(by_run: dict) -> dict:
    """run -> side -> user -> B of that user under the baseline (0) and the variant (1)."""
    out = {}
    for run, users in sorted(by_run.items()):
        out[run] = {side: {u: user_recovery(u, rs[side]).B for u, rs in sorted(users.items())} for side in (0, 1)}
    return out


def paired_runs(mode: str, k: int, by_run: dict) -> list[dict]:
    """Per run: B under each variant and their paired per-user difference, with a 95% user-bootstrap
    interval (e.g. the published judgments against a re-scoring with the published pack)."""
    rows = []
    for run, sides in by_run.items():
        users, diffs = stats.paired_diffs(sides[1], sides[0])  # variant − baseline, per user
        base = [sides[0][u] for u in users]
        rows.append({"run": run, "mode": mode, "k": k if mode == "retrieve" else None, "users": len(users),
                     "B_baseline": sum(base) / len(base) if base else None,
                     "B_variant": float(sum(base) + diffs.sum()) / len(users) if users else None,
                     "diff": float(diffs.mean()) if len(diffs) else None,
                     "diff_ci95": stats.paired_bootstrap_ci(diffs)})
    return rows


def _mean(values) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def _sign(x: float) -> int:
    return 0 if abs(x) < TOLERANCE else (1 if x > 0 else -1)


def _same_order(before: float, after: float) -> bool:
    """Both differences have the same sign (a tie stays a tie)."""
    return _sign(before) == _sign(after)


def _fraction(flags: list[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def _extreme(means: dict, pick) -> str | None:
    """The category with the lowest (min) or highest (max) mean; ties go to the first in CATEGORIES."""
    present = [c for c in CATEGORIES if means[c] is not None]
    if not present:
        return None
    target = pick(means[c] for c in present)
    return next(c for c in present if means[c] == target)
