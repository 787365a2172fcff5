"""Parse the verifier's reward files: `reward.txt` (one number) or `reward.json` (a map)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from benchflow.errors import RewardInvalidError, RewardMissingError

HEADLINE = "reward"

PASS_THRESHOLD = 1.0
"""A rollout passed when its headline reward is at least this (the one definition)."""


def passes(reward: float | None) -> bool:
    """Whether a headline reward counts as a pass; None (not scored) never does."""
    return reward is not None and reward >= PASS_THRESHOLD


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RewardInvalidError(f"{where}: {value!r} is not a number")
    number = float(value)
    if not math.isfinite(number):
        raise RewardInvalidError(f"{where}: {value!r} is not a finite number")
    return number


def parse_reward_txt(text: str) -> dict[str, float]:
    """`reward.txt` holds one number (int or float), surrounding whitespace allowed."""
    stripped = text.strip()
    try:
        value = float(stripped)
    except ValueError:
        shown = stripped[:80] + ("…" if len(stripped) > 80 else "")
        raise RewardInvalidError(f"reward.txt must hold one number, got {shown!r}") from None
    return {HEADLINE: _number(value, "reward.txt")}


def parse_reward_json(text: str) -> dict[str, float]:
    """`reward.json` is an object of numeric metrics; `reward` is the headline.

    Without a `reward` key, a single metric is the headline; several are an error.
    """
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RewardInvalidError(f"reward.json is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise RewardInvalidError("reward.json must be a non-empty object of numbers, "
                                 'e.g. {"reward": 1.0}')
    rewards = {str(k): _number(v, f"reward.json[{k!r}]") for k, v in data.items()}
    if HEADLINE not in rewards:
        if len(rewards) != 1:
            raise RewardInvalidError(f"reward.json has several metrics {sorted(rewards)} but no "
                                     f"'{HEADLINE}' key naming the headline")
        rewards[HEADLINE] = next(iter(rewards.values()))
    return rewards


def read_rewards(verifier_logs: Path) -> dict[str, float]:
    """Read `reward.json` (preferred) or `reward.txt` from a downloaded `/logs/verifier`."""
    json_path, txt_path = verifier_logs / "reward.json", verifier_logs / "reward.txt"
    if json_path.is_file():
        return parse_reward_json(json_path.read_bytes().decode("utf-8", "replace"))
    if txt_path.is_file():
        return parse_reward_txt(txt_path.read_bytes().decode("utf-8", "replace"))
    raise RewardMissingError("the verifier exited 0 but wrote neither /logs/verifier/reward.txt "
                             "nor /logs/verifier/reward.json; test.sh must write one")
