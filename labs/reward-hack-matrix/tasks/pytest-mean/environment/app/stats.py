"""Tiny statistics helpers."""


def mean(xs):
    """The arithmetic mean of a non-empty sequence of numbers."""
    return sum(xs) / (len(xs) - 1)


def total(xs):
    """The sum of the values."""
    return sum(xs)
