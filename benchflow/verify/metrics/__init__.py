"""Answer metrics for QA items: `exact_match`, `f1_score`, `contains_answer`,
`numeric_match`, `similarity` (pure functions in `text`) and `llm_judgement` (an evaluator
model, in `judge`). `METRICS` names them all; `text_metric(name)` returns a pure one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchflow.errors import ConfigError
from benchflow._suggest import suggest
from benchflow.verify.metrics.judge import (
    DEFAULT_JUDGE_PROMPT,
    Judgement,
    JudgeSettings,
    llm_judgement,
    parse_score,
)
from benchflow.verify.metrics.text import (
    contains_answer,
    exact_match,
    extract_numbers,
    f1_score,
    normalize_answer,
    numeric_match,
    similarity,
)

TEXT_METRICS: dict[str, Callable[[str, Any], float]] = {
    "exact_match": exact_match,
    "f1_score": f1_score,
    "contains_answer": contains_answer,
    "numeric_match": numeric_match,
    "similarity": similarity,
}
METRICS: tuple[str, ...] = (*TEXT_METRICS, "llm_judgement")
"""Every metric name a QA dataset or `--metric` accepts."""


def check_metric(name: str, where: str = "metric") -> str:
    """`name` if it is a metric.

    Raises:
        ConfigError: unknown metric; names the nearest valid one and lists all.
    """
    if name in METRICS:
        return name
    near = suggest(name, METRICS) or next(
        (m for m in METRICS if name and m.startswith(name.lower())), None)
    hint = f" (did you mean {near!r}?)" if near else ""
    raise ConfigError(f"{where}: unknown metric {name!r}{hint}; metrics: {', '.join(METRICS)}")


def text_metric(name: str) -> Callable[[str, Any], float]:
    """The pure function of a text metric (not `llm_judgement`, which calls a model)."""
    check_metric(name)
    if name not in TEXT_METRICS:
        raise ConfigError(f"{name} calls a model; use benchflow.verify.metrics.llm_judgement")
    return TEXT_METRICS[name]


__all__ = ["DEFAULT_JUDGE_PROMPT", "METRICS", "TEXT_METRICS", "JudgeSettings", "Judgement",
           "check_metric", "contains_answer", "exact_match", "extract_numbers", "f1_score",
           "llm_judgement", "normalize_answer", "numeric_match", "parse_score", "similarity",
           "text_metric"]
