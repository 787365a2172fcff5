"""The answer-metric verifier of QA items: the predicted answer against the ground truth.

The headline metric is `reward`; extra metrics are added to `rewards` under their names.
An item without ground truth is not scored (rewards None). `llm_judgement` calls the
evaluator model; its raw reply is kept in the result's `judge_replies`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError
from benchflow.task.qa import QaScoring
from benchflow.verify.metrics import (
    DEFAULT_JUDGE_PROMPT,
    JudgeSettings,
    check_metric,
    llm_judgement,
    text_metric,
)


def check_scoring(scoring: QaScoring, where: str = "metric") -> QaScoring:
    """`scoring` with every metric name checked.

    Raises:
        ConfigError: an unknown metric (the nearest valid name is suggested).
    """
    for name in scoring.metrics:
        check_metric(name, where)
    return scoring


def extract_answer(text: str, pattern: str | None) -> str:
    """The answer in an agent's reply: `pattern`'s first group (or whole match) when given and
    found, else the stripped text."""
    text = (text or "").strip()
    if not pattern:
        return text
    match = re.search(pattern, text, re.DOTALL)
    if match is None:
        return text
    return (match.group(1) if match.groups() and match.group(1) is not None
            else match.group(0)).strip()


@dataclass
class AnswerScore:
    """Rewards (None without ground truth), and the judge's raw replies by metric."""

    rewards: dict[str, float] | None
    judge_replies: dict[str, str] = field(default_factory=dict)

    @property
    def reward(self) -> float | None:
        return None if self.rewards is None else self.rewards.get("reward")


def judge_settings(scoring: QaScoring, fallback: ModelEndpoint | None,
                   fallback_model: str | None) -> JudgeSettings:
    """The evaluator for `llm_judgement`: the scoring's endpoint, else the agent's.

    Raises:
        ConfigError: no endpoint or no model for the judge.
    """
    from benchflow.verify.judged import judge_endpoint

    endpoint = judge_endpoint(
        scoring.judge_endpoint or fallback, scoring.judge_model, fallback_model,
        no_endpoint="llm_judgement needs an evaluator endpoint (evaluator_base_url, or "
                    "--model-base-url for the agent's own)",
        no_model="llm_judgement needs an evaluator model (evaluator_model_name / "
                 "--judge-model)")
    return JudgeSettings(endpoint=endpoint,
                         temperature=scoring.judge_temperature,
                         max_retries=scoring.judge_max_retries,
                         extra_params=dict(scoring.judge_extra_params),
                         prompt=scoring.judge_prompt or DEFAULT_JUDGE_PROMPT)


async def score_answer(predicted: str, ground_truth: Any, scoring: QaScoring, *, question: str,
                       judge: JudgeSettings | None = None) -> AnswerScore:
    """Score `predicted` with every metric of `scoring`.

    Raises:
        ConfigError: `llm_judgement` without `judge`.
        ProviderError: the judge's call failed or its reply held no score.
    """
    if ground_truth is None or ground_truth == "":
        return AnswerScore(rewards=None)
    rewards: dict[str, float] = {}
    replies: dict[str, str] = {}
    for name in scoring.metrics:
        if name == "llm_judgement":
            if judge is None:
                raise ConfigError("llm_judgement needs an evaluator model")
            verdict = await llm_judgement(predicted, ground_truth, question=question,
                                          settings=judge)
            value, replies[name] = verdict.score, verdict.reply
        else:
            value = text_metric(name)(predicted, ground_truth)
        rewards[name] = round(float(value), 6)
    rewards = {"reward": rewards[scoring.metric], **rewards}
    return AnswerScore(rewards=rewards, judge_replies=replies)


__all__ = ["AnswerScore", "check_scoring", "extract_answer", "judge_settings", "score_answer"]
