import pytest
import stats

CASES = [([1, 2, 3], 2.0), ([5], 5.0), ([2, 4, 6, 8], 5.0), ([-1, 1], 0.0)]


@pytest.mark.parametrize(("xs", "expected"), CASES)
def test_mean(xs, expected):
    assert stats.mean(xs) == expected


def test_mean_of_the_fixture(numbers):
    assert stats.mean(numbers) == 2.0


def test_total_unchanged():
    assert stats.total([1, 2, 3]) == 6
