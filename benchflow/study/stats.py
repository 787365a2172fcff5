"""The statistics of a comparison, from scipy and numpy (the `study` extra).

Every interval is a bootstrap over tasks: a task is the resampling unit and its attempts
stay together (a cluster bootstrap), so the interval covers the spread of task scores,
attempts' noise included, without treating k attempts of one task as k independent
tasks. Paired differences resample the per-task differences of two arms on the same
tasks. Tests: McNemar's exact test (a binomial test on the discordant pairs) for pass /
fail on paired trials, and a paired permutation test (sign flips of the per-task
differences; exact when 2^n_tasks fits in the resamples) for rewards. Every random
draw comes from a generator seeded by the caller, so a report is reproducible.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from benchflow.job.models import pass_at_k_curve

DEFAULT_RESAMPLES = 10_000
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its confidence interval (None when it cannot be computed:
    fewer than two tasks)."""

    value: float | None
    low: float | None = None
    high: float | None = None

    @property
    def excludes_zero(self) -> bool:
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)


@dataclass(frozen=True)
class TestResult:
    """A test's p-value with what it was computed from."""

    p_value: float | None
    statistic: float | None = None
    n: int = 0
    exact: bool = True


def bootstrap_mean(values: Sequence[float], *, rng: np.random.Generator,
                   confidence: float = DEFAULT_CONFIDENCE,
                   n_resamples: int = DEFAULT_RESAMPLES) -> Estimate:
    """The mean of per-task values with a BCa bootstrap interval over tasks.

    All-equal values give the degenerate interval [v, v] (every resample has the same
    mean); a single task gives the value without an interval.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Estimate(None)
    mean = float(data.mean())
    if data.size < 2:
        return Estimate(mean)
    if np.ptp(data) == 0:
        return Estimate(mean, mean, mean)
    with warnings.catch_warnings():
        # BCa may find the jackknife degenerate on tiny samples: fall back to percentile
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap((data,), np.mean, confidence_level=confidence,
                                 n_resamples=n_resamples, method="BCa", rng=rng)
    low, high = result.confidence_interval
    if not (np.isfinite(low) and np.isfinite(high)):
        result = stats.bootstrap((data,), np.mean, confidence_level=confidence,
                                 n_resamples=n_resamples, method="percentile", rng=rng)
        low, high = result.confidence_interval
    # a BCa end can land a rounding error outside the data's range
    low, high = max(float(low), float(data.min())), min(float(high), float(data.max()))
    return Estimate(mean, low, high)


def mcnemar_exact(b: int, c: int) -> TestResult:
    """McNemar's exact test: of the b + c discordant pairs (b: only the first arm passed,
    c: only the second), is the split consistent with 50/50? Two-sided binomial p-value;
    1.0 when there is no discordant pair."""
    n = b + c
    if n == 0:
        return TestResult(1.0, 0.0, 0)
    result = stats.binomtest(min(b, c), n, 0.5, alternative="two-sided")
    return TestResult(float(result.pvalue), float(min(b, c)), n)


def paired_permutation(differences: Sequence[float], *, rng: np.random.Generator,
                       n_resamples: int = DEFAULT_RESAMPLES) -> TestResult:
    """Two-sided paired permutation test of mean(differences) = 0, by random sign flips
    of each task's difference (every one of the 2^n flips when that fits in
    `n_resamples`: then the p-value is exact)."""
    data = np.asarray(differences, dtype=float)
    if data.size == 0:
        return TestResult(None)
    if not np.any(data) or data.size == 1:  # one task: both sign flips are as extreme
        return TestResult(1.0, float(data.mean()), int(data.size))

    def mean_difference(x: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(x, axis=axis)

    result = stats.permutation_test((data,), mean_difference, permutation_type="samples",
                                    vectorized=True, n_resamples=n_resamples,
                                    alternative="two-sided", rng=rng)
    return TestResult(float(min(1.0, result.pvalue)), float(result.statistic),
                      int(data.size), exact=2 ** data.size <= n_resamples)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task: c passes in n attempts (k <= n)."""
    if not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n attempts (n = {n})")
    return pass_at_k_curve(n, c)[k - 1]


def seeded(seed: int, *keys: str) -> np.random.Generator:
    """A generator for one computation of a report: the same seed and keys (arm names,
    what is computed) always give the same draws, whatever the order of the arms."""
    words = [seed & 0xFFFFFFFF]
    for key in keys:
        words.extend(key.encode())
        words.append(0)
    return np.random.default_rng(np.random.SeedSequence(words))


__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_RESAMPLES", "Estimate", "TestResult",
           "bootstrap_mean", "mcnemar_exact", "paired_permutation", "pass_at_k", "seeded"]
