"""`llm_judgement`: an evaluator model scores an answer in [0, 1].

The judge gets a prompt (overridable; `{question}`, `{answer}`, `{ground_truth}` are filled
in) and its reply is parsed robustly by `parse_score`: a JSON object with `score`, a
"score: x" line, a fraction "4/5", a percentage, or a bare number; scores on a 0-10 or
0-100 scale are rescaled; correct/incorrect verdicts count as 1/0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from benchflow.config import ModelEndpoint
from benchflow.errors import ProviderError

DEFAULT_JUDGE_PROMPT = """You are grading an answer to a question.

Question:
{question}

Reference answer:
{ground_truth}

Answer to grade:
{answer}

Decide how correct the answer is compared with the reference (meaning matters, wording does not).
Reply with a JSON object only: {{"score": <a number from 0 to 1>, "reason": "<one sentence>"}}"""


@dataclass(frozen=True)
class JudgeSettings:
    """The evaluator: its endpoint, sampling temperature, retries, extra request params, prompt."""

    endpoint: ModelEndpoint
    temperature: float = 0.0
    max_retries: int = 3
    extra_params: dict[str, Any] = field(default_factory=dict)
    prompt: str = DEFAULT_JUDGE_PROMPT
    timeout_sec: float = 120.0


@dataclass(frozen=True)
class Judgement:
    score: float
    reply: str


_JSON_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)
_LABELLED = re.compile(r"(?:score|rating|grade)\W{0,3}\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?)|(%))?",
                       re.IGNORECASE)
_FRACTION = re.compile(r"(-?\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)")
_PERCENT = re.compile(r"(-?\d+(?:\.\d+)?)\s*%")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _scaled(value: float, scale: float | None = None) -> float:
    if scale:
        value = value / scale
    elif value > 1.0:
        value = value / 10.0 if value <= 10.0 else value / 100.0
    return min(1.0, max(0.0, value))


def parse_score(reply: str) -> float | None:
    """A score in [0, 1] from a judge's reply, or None when it holds none."""
    for match in _JSON_OBJECT.finditer(reply):
        try:
            data = json.loads(match.group(0))
        except ValueError:
            continue
        if isinstance(data, dict):
            value = data.get("score", data.get("rating"))
            if isinstance(value, bool):
                return float(value)
            if isinstance(value, (int, float)):
                return _scaled(float(value))
            if isinstance(value, str):
                inner = parse_score(value)
                if inner is not None:
                    return inner
    labelled = _LABELLED.search(reply)
    if labelled:
        value, denominator, percent = labelled.groups()
        return _scaled(float(value), float(denominator) if denominator else
                       (100.0 if percent else None))
    fraction = _FRACTION.search(reply)
    if fraction and float(fraction.group(2)) > 0:
        return _scaled(float(fraction.group(1)), float(fraction.group(2)))
    percent = _PERCENT.search(reply)
    if percent:
        return _scaled(float(percent.group(1)), 100.0)
    lowered = reply.lower()
    if re.search(r"\b(incorrect|wrong|fail(?:ed)?)\b", lowered):
        return 0.0
    if re.search(r"\b(correct|right|pass(?:ed)?)\b", lowered):
        return 1.0
    number = _NUMBER.search(reply)
    return _scaled(float(number.group(0))) if number else None


def render_prompt(template: str, **fields: Any) -> str:
    """Fill `{question}`, `{answer}`, `{ground_truth}` (unknown placeholders stay as they are)."""
    class _Keep(dict[str, Any]):
        def __missing__(self, key: str) -> str:
            return "{" + key + "}"

    return template.format_map(_Keep({k: "" if v is None else v for k, v in fields.items()}))


async def llm_judgement(predicted: str, ground_truth: Any, *, question: str,
                        settings: JudgeSettings) -> Judgement:
    """Ask the evaluator model how correct `predicted` is; returns the score and raw reply.

    Raises:
        ProviderError: the model call failed, or its reply holds no score.
    """
    from benchflow.models import ModelClient

    prompt = render_prompt(settings.prompt, question=question, answer=predicted,
                           ground_truth=ground_truth)
    async with ModelClient(settings.endpoint, max_retries=settings.max_retries,
                           timeout_sec=settings.timeout_sec) as client:
        reply = await client.chat([{"role": "user", "content": prompt}],
                                  temperature=settings.temperature, extra=settings.extra_params)
    score = parse_score(reply.text)
    if score is None:
        raise ProviderError(f"the judge's reply holds no score: {reply.text[:200]!r}")
    return Judgement(score=score, reply=reply.text)


__all__ = ["DEFAULT_JUDGE_PROMPT", "JudgeSettings", "Judgement", "llm_judgement", "parse_score",
           "render_prompt"]
