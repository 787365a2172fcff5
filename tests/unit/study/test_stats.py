"""The statistics against independently computed and published values."""

from __future__ import annotations

import itertools
from math import comb

import numpy as np
import pytest

from benchflow.study.stats import (
    bootstrap_mean,
    mcnemar_exact,
    paired_permutation,
    pass_at_k,
    seeded,
)


def exact_mcnemar_by_hand(b: int, c: int) -> float:
    """Two-sided exact McNemar: twice the binomial(n, 1/2) tail of min(b, c), capped at 1."""
    n = b + c
    tail = sum(comb(n, i) for i in range(min(b, c) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def test_mcnemar_matches_the_published_example():
    # Fagerland, Lydersen & Laake (2013), BMC Med Res Methodol 13:91, the airway
    # hyper-responsiveness example: 1 vs 7 discordant pairs, exact conditional p = 0.070
    result = mcnemar_exact(1, 7)
    assert result.p_value == pytest.approx(0.0703125)
    assert round(result.p_value, 3) == 0.070
    assert result.n == 8


@pytest.mark.parametrize(("b", "c"), [(0, 9), (3, 3), (5, 12), (40, 21), (0, 1), (17, 0)])
def test_mcnemar_matches_the_binomial_closed_form(b, c):
    assert mcnemar_exact(b, c).p_value == pytest.approx(exact_mcnemar_by_hand(b, c), rel=1e-12)
    assert mcnemar_exact(b, c).p_value == mcnemar_exact(c, b).p_value


def test_mcnemar_without_discordant_pairs_is_one():
    assert mcnemar_exact(0, 0).p_value == 1.0


@pytest.mark.parametrize("n", range(1, 12))
def test_pass_at_k_matches_the_closed_form(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k),
                                                       abs=1e-12)


def test_pass_at_k_rejects_k_above_n():
    with pytest.raises(ValueError, match="pass@4"):
        pass_at_k(3, 1, 4)


def test_the_bootstrap_interval_covers_the_true_mean_at_about_the_nominal_rate():
    """Tasks of varying difficulty (beta(2, 3), mean 0.4), 3 attempts each, 30 tasks: the
    95% interval over tasks should contain 0.4 about 95% of the time."""
    rng = np.random.default_rng(20260101)
    n_sims, hits = 400, 0
    for sim in range(n_sims):
        difficulty = rng.beta(2, 3, size=30)
        task_means = rng.binomial(3, difficulty) / 3
        ci = bootstrap_mean(task_means, rng=seeded(7, str(sim)), n_resamples=2000)
        assert ci.low is not None and ci.high is not None
        assert ci.low <= ci.value <= ci.high
        hits += ci.low <= 0.4 <= ci.high
    coverage = hits / n_sims
    assert 0.92 <= coverage <= 0.98, coverage


def test_the_bootstrap_is_reproducible_and_seeded():
    data = list(np.random.default_rng(5).random(12))
    a = bootstrap_mean(data, rng=seeded(0, "x"))
    b = bootstrap_mean(data, rng=seeded(0, "x"))
    c = bootstrap_mean(data, rng=seeded(1, "x"))
    assert (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)
    assert a.value == pytest.approx(sum(data) / len(data))


def test_degenerate_and_tiny_samples():
    assert bootstrap_mean([1.0] * 5, rng=seeded(0)).__dict__ == {"value": 1.0, "low": 1.0,
                                                                 "high": 1.0}
    one = bootstrap_mean([0.5], rng=seeded(0))
    assert (one.value, one.low, one.high) == (0.5, None, None)
    assert bootstrap_mean([], rng=seeded(0)).value is None


def test_an_interval_that_should_exclude_zero_does():
    ci = bootstrap_mean([1.0] * 4 + [0.5] * 4, rng=seeded(0))
    assert ci.excludes_zero and ci.low >= 0.5


def exact_sign_flip_p(diffs: list[float]) -> float:
    """The two-sided sign-flip p-value by enumerating all 2^n flips."""
    observed = abs(np.mean(diffs))
    count = total = 0
    for signs in itertools.product((1, -1), repeat=len(diffs)):
        total += 1
        count += abs(np.mean(np.multiply(signs, diffs))) >= observed - 1e-12
    return count / total


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_permutation_test_is_exact_for_few_tasks(seed):
    diffs = list(np.random.default_rng(seed).normal(0.2, 0.5, size=9).round(3))
    result = paired_permutation(diffs, rng=seeded(0))
    assert result.exact
    assert result.p_value == pytest.approx(exact_sign_flip_p(diffs), abs=1e-9)


def test_the_permutation_test_of_six_wins():
    assert paired_permutation([1.0] * 6, rng=seeded(0)).p_value == pytest.approx(2 / 64)
    assert paired_permutation([0.0] * 6, rng=seeded(0)).p_value == 1.0


def test_seeded_streams_depend_on_keys_not_on_call_order():
    a1, b1 = seeded(3, "a").random(), seeded(3, "b").random()
    b2, a2 = seeded(3, "b").random(), seeded(3, "a").random()
    assert (a1, b1) == (a2, b2) and a1 != b1
