"""Answer metrics that compare text: pure functions `(predicted, ground_truth) -> float in [0, 1]`.

Normalization (`normalize_answer`, the SQuAD v1.1 evaluation script's): lower-case, drop
punctuation, drop the articles "a", "an", "the", collapse whitespace. `exact_match`,
`f1_score`, `contains_answer` and `similarity` compare normalized strings; `numeric_match`
compares numbers. A ground truth may be a list of acceptable answers: the score is the best
over them.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Callable, Sequence

GroundTruth = str | int | float | Sequence[str | int | float]

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = frozenset(string.punctuation)
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def normalize_answer(text: str) -> str:
    """SQuAD normalization: lower case, no punctuation, no articles, single spaces."""
    text = str(text).lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _truths(ground_truth: GroundTruth) -> list[str]:
    if isinstance(ground_truth, (list, tuple)):
        return [str(g) for g in ground_truth]
    return [str(ground_truth)]


def _best(fn: Callable[[str, str], float]) -> Callable[[str, GroundTruth], float]:
    def metric(predicted: str, ground_truth: GroundTruth) -> float:
        return max((fn(str(predicted), truth) for truth in _truths(ground_truth)), default=0.0)

    metric.__name__ = fn.__name__.lstrip("_")
    metric.__doc__ = fn.__doc__
    return metric


def _exact_match(predicted: str, truth: str) -> float:
    """1.0 when the normalized strings are equal, else 0.0."""
    return float(normalize_answer(predicted) == normalize_answer(truth))


def _f1_score(predicted: str, truth: str) -> float:
    """Token-level F1 of the normalized strings (SQuAD): 2PR / (P + R) over shared tokens.

    Two empty answers score 1.0; one empty answer scores 0.0.
    """
    pred, gold = normalize_answer(predicted).split(), normalize_answer(truth).split()
    if not pred or not gold:
        return float(pred == gold)
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def _contains_answer(predicted: str, truth: str) -> float:
    """1.0 when the normalized ground truth occurs in the normalized prediction on word
    boundaries ("Paris" in "It is Paris."; not "art" in "party")."""
    gold = normalize_answer(truth)
    if not gold:
        return 0.0
    return float(re.search(rf"(?:^| ){re.escape(gold)}(?: |$)", normalize_answer(predicted))
                 is not None)


def _similarity(predicted: str, truth: str) -> float:
    """rapidfuzz's normalized Indel similarity (`fuzz.ratio` / 100) of the normalized strings."""
    from benchflow._extras import require

    fuzz = require("rapidfuzz.fuzz", "models", "the similarity metric")
    return fuzz.ratio(normalize_answer(predicted), normalize_answer(truth)) / 100.0


def extract_numbers(text: str) -> list[float]:
    """Every number in `text`, in order: signs, thousands separators, decimals, exponents."""
    out: list[float] = []
    for match in _NUMBER.finditer(str(text)):
        token = match.group(0)
        if not any(ch.isdigit() for ch in token):
            continue
        try:
            out.append(float(token.replace(",", "")))
        except ValueError:
            continue
    return out


def numeric_match(predicted: str, ground_truth: GroundTruth, *, rel_tol: float = 1e-6,
                  abs_tol: float = 1e-9) -> float:
    """1.0 when the last number in the prediction equals the first number of a ground truth
    within `rel_tol` / `abs_tol` (`math.isclose`); 0.0 when either has no number."""
    numbers = extract_numbers(predicted)
    if not numbers:
        return 0.0
    value = numbers[-1]
    for truth in _truths(ground_truth):
        gold = extract_numbers(truth)
        if gold and math.isclose(value, gold[0], rel_tol=rel_tol, abs_tol=abs_tol):
            return 1.0
    return 0.0


exact_match = _best(_exact_match)
f1_score = _best(_f1_score)
contains_answer = _best(_contains_answer)
similarity = _best(_similarity)

__all__ = ["GroundTruth", "contains_answer", "exact_match", "extract_numbers", "f1_score",
           "normalize_answer", "numeric_match", "similarity"]
