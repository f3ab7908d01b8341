"""Honest uncertainty for per-user figures: user-level bootstrap intervals, paired tests, Holm.

The unit of resampling is the user. A user's 31 targets share one simulator, one transcript set
and one memory store, so they are not independent samples; only users are.

All procedures are numpy-vectorised and take an explicit seed, so a table computed twice is
identical. The resample matrices depend only on (number of users, resamples, seed), so they are
built once and reused: every figure over the same users then costs one matrix-vector product.
They are drawn and kept in blocks of BLOCK resamples, in one byte per cell: memory stays a few MB
at 500 users (a float matrix of 10,000 resamples × 500 users was 40 MB, and its construction
three times that).
"""
from __future__ import annotations

import functools
import itertools
import math

import numpy as np
from threadpoolctl import ThreadpoolController

LEVEL = 0.95
RESAMPLES = 10_000
BLOCK = 1_000  # resamples drawn, kept and multiplied at a time
EXACT_LIMIT = 2 ** 16  # enumerate every sign pattern when there are at most this many


def _clean(values) -> np.ndarray:
    """The finite values as float64 (a user without a value for this figure does not count)."""
    arr = np.asarray([np.nan if v is None else v for v in values], dtype=np.float64)
    return arr[np.isfinite(arr)]


def _percentile_interval(stats: np.ndarray, level: float) -> list[float]:
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return [float(low), float(high)]


def bootstrap_ci(values, *, resamples: int = RESAMPLES, seed: int = 0, level: float = LEVEL) -> list[float] | None:
    """Percentile interval of the mean from resampling users with replacement.

    None without data; a single user (or a constant) gives the degenerate interval [x, x].
    """
    x = _clean(values)
    if x.size == 0:
        return None
    if x.size == 1 or np.all(x == x[0]):
        return [float(x[0]), float(x[0])]
    return _percentile_interval(_times(_resample_counts(x.size, resamples, seed), x) / x.size, level)


def _times(blocks: tuple[np.ndarray, ...], x: np.ndarray) -> np.ndarray:
    """The stacked blocks (resamples × n, small integers) times x, one block in float at a time.

    BLAS runs on one thread: a product this small is dominated by waking and joining threads
    (20x slower with OpenBLAS's threads on a busy 2-core machine). Each element is still one dot
    product over the same n values in the same kernel, so the figures do not change; they also no
    longer depend on the machine's core count. The one float buffer is reused: allocating a fresh
    block per product cost more than the product itself."""
    out = np.empty(sum(len(block) for block in blocks))
    buffer = np.empty(blocks[0].shape)
    start = 0
    with _blas().limit(limits=1, user_api="blas"):
        for block in blocks:
            rows = buffer[:len(block)]
            np.copyto(rows, block)
            np.matmul(rows, x, out=out[start:start + len(block)])
            start += len(block)
    return out


@functools.cache
def _blas() -> ThreadpoolController:
    """Found once: looking up the loaded BLAS libraries costs more than a product."""
    return ThreadpoolController()


def _blocks(resamples: int):
    return [min(BLOCK, resamples - start) for start in range(0, resamples, BLOCK)]


# Rows drawn at a time while a block is built: drawing a block in parts gives the same numbers
# (the generator's stream does not depend on how it is split), and the int64 draws of a whole
# block were four times the block's own size (at 500 users, +30 MB at the peak of `tables`).
# BLOCK itself stays: the products of smaller blocks differ in the last bit.
DRAW = 100


def _drawn(rng: np.random.Generator, high: int, rows: int, n: int):
    """Parts of a (rows × n) draw of integers in [0, high)."""
    for start in range(0, rows, DRAW):
        yield rng.integers(0, high, size=(min(DRAW, rows - start), n))


@functools.lru_cache(maxsize=8)
def _resample_counts(n: int, resamples: int, seed: int) -> tuple[np.ndarray, ...]:
    """How often each of n users is drawn in each resample (rows sum to n), in blocks of rows."""
    rng = np.random.default_rng(seed)
    blocks = []
    for rows in _blocks(resamples):
        parts = []
        for idx in _drawn(rng, n, rows, n):
            flat = (idx + n * np.arange(len(idx))[:, None]).ravel()
            parts.append(np.bincount(flat, minlength=idx.size).reshape(idx.shape).astype(np.min_scalar_type(n)))
        counts = np.concatenate(parts)  # a count never exceeds n; nearly never 255, so mostly one byte
        blocks.append(counts.astype(np.min_scalar_type(counts.max()), copy=False))
        blocks[-1].flags.writeable = False
    return tuple(blocks)


@functools.lru_cache(maxsize=8)
def _random_signs(n: int, resamples: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    blocks = []
    for rows in _blocks(resamples):
        blocks.append(np.concatenate([part.astype(np.int8) * 2 - 1 for part in _drawn(rng, 2, rows, n)]))
        blocks[-1].flags.writeable = False
    return tuple(blocks)


def release_resamples() -> None:
    """Let go of the cached resample draws (at 500 users about 5 MB each): for a caller that is done
    with intervals and tests and goes on to other work (the report's pages)."""
    _resample_counts.cache_clear()
    _random_signs.cache_clear()


def paired_diffs(a: dict, b: dict) -> tuple[list[str], np.ndarray]:
    """Per-user a − b over the users both have a finite value for, in sorted user order."""
    users = sorted(u for u in a.keys() & b.keys()
                   if a[u] is not None and b[u] is not None and math.isfinite(a[u]) and math.isfinite(b[u]))
    return users, np.asarray([a[u] - b[u] for u in users], dtype=np.float64)


def paired_bootstrap_ci(diffs, *, resamples: int = RESAMPLES, seed: int = 0,
                        level: float = LEVEL) -> list[float] | None:
    """Interval of the mean paired difference: users are resampled with both of their values."""
    return bootstrap_ci(diffs, resamples=resamples, seed=seed, level=level)


def sign_flip_p(diffs, *, resamples: int = RESAMPLES, seed: int = 0) -> float | None:
    """Two-sided p-value of the paired sign-flip permutation test for a zero mean difference.

    Under the null each user's difference is equally likely to have either sign. With few users
    every sign pattern is enumerated (exact p); otherwise `resamples` random patterns are drawn
    and the observed pattern is counted among them ((hits + 1) / (resamples + 1)), so p is never 0.
    """
    d = _clean(diffs)
    if d.size == 0:
        return None
    observed = abs(d.mean())
    if observed == 0.0:
        return 1.0
    tolerance = 1e-12 * max(1.0, float(np.abs(d).max()))
    if 2 ** d.size <= min(resamples, EXACT_LIMIT):
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        stats = np.abs(signs @ d) / d.size
        return float(np.mean(stats >= observed - tolerance))
    stats = np.abs(_times(_random_signs(d.size, resamples, seed), d)) / d.size
    hits = int(np.count_nonzero(stats >= observed - tolerance))
    return (hits + 1) / (resamples + 1)


def holm(pvalues: list[float | None]) -> list[float | None]:
    """Holm step-down adjustment: the i-th smallest of m p-values is multiplied by (m − i),
    running maxima keep the order, values are capped at 1. None stays None and is not counted."""
    present = [(p, i) for i, p in enumerate(pvalues) if p is not None]
    m = len(present)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(sorted(present)):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def mean_std(values) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (n − 1) of the finite values; std is None for one value."""
    x = _clean(values)
    if x.size == 0:
        return None, None
    std = float(x.std(ddof=1)) if x.size > 1 else None
    return float(x.mean()), std
