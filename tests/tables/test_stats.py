"""User-level bootstrap, paired sign-flip test and Holm: issue 8's acceptance and scipy cross-checks."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from memaudit.tables import stats


def test_bootstrap_of_a_constant_is_degenerate():
    assert stats.bootstrap_ci([0.5] * 40) == [0.5, 0.5]
    assert stats.bootstrap_ci([0.7]) == [0.7, 0.7]
    assert stats.bootstrap_ci([]) is None
    assert stats.bootstrap_ci([None, None]) is None


def test_missing_values_do_not_count():
    assert stats.bootstrap_ci([0.3, None, float("nan"), 0.3]) == [0.3, 0.3]
    assert stats.mean_std([1.0, None, 3.0]) == (2.0, pytest.approx(math.sqrt(2.0)))


def test_intervals_shrink_with_more_users():
    rng = np.random.default_rng(1)
    few, many = rng.normal(0.6, 0.1, 10), rng.normal(0.6, 0.1, 200)
    low_few, high_few = stats.bootstrap_ci(few)
    low_many, high_many = stats.bootstrap_ci(many)
    assert high_many - low_many < (high_few - low_few) / 2
    assert low_few < few.mean() < high_few


def test_bootstrap_is_reproducible_and_seeded():
    x = np.random.default_rng(2).normal(size=30)
    assert stats.bootstrap_ci(x, seed=3) == stats.bootstrap_ci(x, seed=3)
    assert stats.bootstrap_ci(x, seed=3) != stats.bootstrap_ci(x, seed=4)


def test_bootstrap_matches_scipy_percentile_interval():
    x = np.random.default_rng(5).normal(0.55, 0.07, 50)
    ours = stats.bootstrap_ci(x, resamples=20000)
    theirs = scipy_stats.bootstrap((x,), np.mean, n_resamples=20000, method="percentile",
                                   confidence_level=0.95, random_state=0).confidence_interval
    se = x.std(ddof=1) / math.sqrt(x.size)
    assert ours[0] == pytest.approx(theirs.low, abs=0.05 * se * 4)
    assert ours[1] == pytest.approx(theirs.high, abs=0.05 * se * 4)


def test_mean_std_is_the_sample_std():
    mean, std = stats.mean_std([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and std == pytest.approx(math.sqrt(5 / 3))
    assert stats.mean_std([4.0]) == (4.0, None)
    assert stats.mean_std([]) == (None, None)


def test_paired_test_detects_a_constant_shift():
    base = np.random.default_rng(6).uniform(0.3, 0.8, 30)
    users, diffs = stats.paired_diffs({f"u{i}": v + 0.05 for i, v in enumerate(base)},
                                      {f"u{i}": v for i, v in enumerate(base)})
    assert len(users) == 30 and np.allclose(diffs, 0.05)
    assert stats.sign_flip_p(diffs) == pytest.approx(1 / 10001)  # only the observed pattern is as extreme
    assert stats.paired_bootstrap_ci(diffs) == [pytest.approx(0.05), pytest.approx(0.05)]
    # with few users every sign pattern is enumerated: the two all-same-sign patterns out of 2^8
    assert stats.sign_flip_p(np.full(8, 0.05)) == pytest.approx(2 / 256)


def test_paired_test_does_not_detect_a_relabelling():
    """Swapping the two systems' labels at random per user leaves no real difference."""
    rng = np.random.default_rng(7)
    a, b = rng.uniform(0.3, 0.8, 40), rng.uniform(0.3, 0.8, 40)
    swap = rng.random(40) < 0.5
    x, y = np.where(swap, a, b), np.where(swap, b, a)
    _, diffs = stats.paired_diffs(dict(enumerate(x)), dict(enumerate(y)))
    assert stats.sign_flip_p(diffs) > 0.05
    low, high = stats.paired_bootstrap_ci(diffs)
    assert low < 0 < high


def test_all_zero_differences_give_p_one():
    assert stats.sign_flip_p([0.0, 0.0, 0.0]) == 1.0
    assert stats.sign_flip_p([]) is None


@pytest.mark.parametrize("n", [10, 30])
def test_sign_flip_matches_scipy_paired_permutation_test(n):
    rng = np.random.default_rng(n)
    x = rng.normal(0.6, 0.1, n)
    y = x - rng.normal(0.03, 0.08, n)
    ours = stats.sign_flip_p(x - y, resamples=20000)
    theirs = scipy_stats.permutation_test((x, y), lambda a, b: np.mean(a - b), permutation_type="samples",
                                          n_resamples=20000, alternative="two-sided", random_state=0).pvalue
    tolerance = 1e-9 if 2 ** n <= 20000 else 4 * math.sqrt(theirs * (1 - theirs) / 20000) + 1e-3
    assert ours == pytest.approx(theirs, abs=tolerance)


def test_paired_diffs_use_only_shared_users_in_sorted_order():
    users, diffs = stats.paired_diffs({"b": 0.5, "a": 0.75, "c": None, "d": 1.0}, {"a": 0.5, "b": 0.5, "c": 0.5})
    assert users == ["a", "b"] and diffs.tolist() == [0.25, 0.0]


def test_holm_matches_a_hand_computation():
    # sorted: 0.005·4 = 0.02, 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 -> running max 0.06
    assert stats.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert stats.holm([0.5, 0.6]) == [1.0, 1.0]
    assert stats.holm([0.02, None]) == [0.02, None]
    assert stats.holm([]) == []
