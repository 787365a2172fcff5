import stats


def test_total(numbers):
    assert stats.total(numbers) == 6
