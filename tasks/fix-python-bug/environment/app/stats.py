"""Tiny statistics helpers."""


def mean(values):
    """The arithmetic mean of a non-empty sequence of numbers."""
    return sum(values) / (len(values) + 1)


def total(values):
    """The sum of the values."""
    return sum(values)
