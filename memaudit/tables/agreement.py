"""Agreement between judges (and between a judge and a person): pure functions over scores on the
five-level rubric. Krippendorff's α (ordinal) comes from the `krippendorff` package, Cohen's κ
(quadratic weights) from scikit-learn; exact and within-one-level agreement are shares.

A score matrix has one row per judge and one column per target; NaN marks a judge that gave no
valid score for that target (dropped). Intervals resample users, not targets: a user's targets
share one memory and one judge mood, so they are not independent."""
from __future__ import annotations

import math
import warnings

import numpy as np

from memaudit.types import RUBRIC

ALPHA_RESAMPLES = 1000  # α is recomputed per resample: fewer than the tables' mean intervals
LEVELS = np.array(RUBRIC.scores)


def level(score: float) -> int:
    """The rubric level (0..4) of a score; a score between levels goes to the nearest one."""
    return int(np.abs(LEVELS - score).argmin())


def alpha_ordinal(matrix: np.ndarray) -> float | None:
    """Krippendorff's α (ordinal) of a judges × targets matrix; None when it is undefined (fewer
    than two judges, no target with two scores, or no variation at all)."""
    import krippendorff  # imported where used: the tables of a store without panels never need it

    pairable = (~np.isnan(matrix)).sum(axis=0) >= 2
    if matrix.shape[0] < 2 or not pairable.any():
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 0/0 when every score is the same
        try:
            value = krippendorff.alpha(reliability_data=matrix[:, pairable], level_of_measurement="ordinal",
                                       value_domain=list(RUBRIC.scores))
        except ValueError:  # a single value in the data: α is undefined
            return None
    return None if value is None or math.isnan(value) else float(value)


def alpha_interval(matrix: np.ndarray, users: list, *, resamples: int, seed: int = 0,
                   level_: float = 0.95) -> list[float] | None:
    """A percentile interval of α over user-bootstrap resamples (users drawn with replacement,
    each bringing all of its targets)."""
    if resamples <= 0 or alpha_ordinal(matrix) is None:
        return None
    groups: dict = {}
    for column, user in enumerate(users):
        groups.setdefault(user, []).append(column)
    columns = list(groups.values())
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(min(resamples, ALPHA_RESAMPLES)):
        picks = rng.integers(0, len(columns), len(columns))
        value = alpha_ordinal(matrix[:, [c for p in picks for c in columns[p]]])
        if value is not None:
            values.append(value)
    if not values:
        return None
    tail = (1 - level_) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return [float(low), float(high)]


def pair_agreement(a: list[float | None], b: list[float | None]) -> dict:
    """Two raters over the same targets (None = no score): quadratic-weighted κ, exact and
    within-one-level shares, over the targets both scored."""
    both = [(level(x), level(y)) for x, y in zip(a, b) if x is not None and y is not None]
    if not both:
        return {"kappa_quadratic": None, "exact": None, "within_one": None, "n": 0}
    la, lb = (list(side) for side in zip(*both))
    return {"kappa_quadratic": kappa_quadratic(la, lb), "exact": sum(x == y for x, y in both) / len(both),
            "within_one": sum(abs(x - y) <= 1 for x, y in both) / len(both), "n": len(both)}


def kappa_quadratic(la: list[int], lb: list[int]) -> float | None:
    """Cohen's κ with quadratic weights over rubric levels; None when undefined (no variation)."""
    from sklearn.metrics import cohen_kappa_score  # seconds to import: only when there are pairs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined (one level only) is reported as None, not warned
        value = cohen_kappa_score(la, lb, weights="quadratic", labels=list(range(len(RUBRIC.scores))))
    return None if math.isnan(value) else float(value)


def panel_agreement(matrix: np.ndarray, names: list[str], users: list, *, resamples: int, seed: int = 0) -> dict:
    """α with its interval, the share of targets on which every judge gave the same level (exact) or
    levels at most one apart (within one), over targets with at least two valid scores, and every
    pair of judges."""
    levels = [[level(s) for s in column if not math.isnan(s)] for column in matrix.T]
    judged = [ls for ls in levels if len(ls) >= 2]
    rows = [[None if math.isnan(s) else float(s) for s in row] for row in matrix]
    pairs = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            found = pair_agreement(rows[i], rows[j])
            pairs.append({"a": names[i], "b": names[j], "kappa_quadratic": found["kappa_quadratic"],
                          "exact": found["exact"]})
    return {"alpha_ordinal": alpha_ordinal(matrix),
            "alpha_ci": alpha_interval(matrix, users, resamples=resamples, seed=seed),
            "exact": sum(max(ls) == min(ls) for ls in judged) / len(judged) if judged else None,
            "within_one": sum(max(ls) - min(ls) <= 1 for ls in judged) / len(judged) if judged else None,
            "pairs": pairs}


def retest(groups: list[list[float]]) -> dict:
    """Test–retest over targets asked more than once (each group: a target's valid scores, repeat 0
    first): the share whose score changed and the mean absolute change from the first answer."""
    asked = [g for g in groups if len(g) >= 2]
    if not asked:
        return {"changed": None, "mean_abs_change": None, "targets": 0}
    changes = [sum(abs(s - g[0]) for s in g[1:]) / (len(g) - 1) for g in asked]
    return {"changed": sum(max(g) != min(g) for g in asked) / len(asked),
            "mean_abs_change": sum(changes) / len(changes), "targets": len(asked)}


def rate(passed: int, n: int) -> tuple[float | None, list[float] | None]:
    """A share with its 95% Wilson interval (scipy)."""
    if n == 0:
        return None, None
    from scipy.stats import binomtest

    ci = binomtest(passed, n).proportion_ci(confidence_level=0.95, method="wilson")
    return passed / n, [float(ci.low), float(ci.high)]
