import pytest


@pytest.fixture
def numbers():
    return [1, 2, 3]
