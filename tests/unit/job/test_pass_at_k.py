"""pass@k: the unbiased estimator 1 - C(n-c, k) / C(n, k), averaged over task groups."""

from __future__ import annotations

import random
from math import comb

from benchflow.job.models import _pass_at_k
from benchflow.rollout.result import RolloutResult


def result(task: str, attempt: int, reward: float) -> RolloutResult:
    return RolloutResult(job_name="j", rollout_name=f"{task}-{attempt}", task_name=task,
                         dataset_name="d", agent_name="a", attempt=attempt, reward=reward)


def test_matches_the_binomial_formula_for_uneven_groups():
    rng = random.Random(7)
    results, groups = [], {}
    for g in range(25):
        n = rng.randint(1, 15)
        passed = [rng.random() < 0.4 for _ in range(n)]
        results += [result(f"t{g}", i + 1, float(p)) for i, p in enumerate(passed)]
        groups[f"t{g}"] = (n, sum(passed))
    expected = {}
    for k in range(1, max(n for n, _ in groups.values()) + 1):
        scores = [1 - comb(n - c, k) / comb(n, k) for n, c in groups.values() if n >= k]
        expected[str(k)] = sum(scores) / len(scores)
    got = _pass_at_k(results)
    assert got is not None and got.keys() == expected.keys()
    assert all(abs(got[k] - expected[k]) < 1e-12 for k in expected)


def test_a_thousand_attempts_of_one_task():
    results = [result("t", i + 1, float(i % 4 == 0)) for i in range(1000)]  # 250 pass
    got = _pass_at_k(results)
    assert got is not None and len(got) == 1000
    assert abs(got["1"] - 0.25) < 1e-12 and got["751"] == 1.0  # 750 failures: k=751 must pass
    assert abs(got["2"] - (1 - (750 * 749) / (1000 * 999))) < 1e-12
