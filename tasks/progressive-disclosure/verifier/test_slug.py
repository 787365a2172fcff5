import sys

sys.path.insert(0, "/app")

from slug import slugify  # noqa: E402


def test_lowercase():
    assert slugify("Hello") == "hello"


def test_spaces_become_hyphens():
    assert slugify("hello world") == "hello-world"


def test_punctuation_is_dropped():
    assert slugify("hello, world!") == "hello-world"


def test_runs_collapse_and_ends_are_stripped():
    assert slugify("  Hello, World -- 2024! ") == "hello-world-2024"
