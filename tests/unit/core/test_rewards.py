"""Reward files: reward.txt holds one number, reward.json a map with a headline."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchflow.errors import RewardInvalidError, RewardMissingError
from benchflow.verify.rewards import parse_reward_json, parse_reward_txt, read_rewards


@pytest.mark.parametrize(("text", "value"), [("1", 1.0), ("0\n", 0.0), (" 0.25 \n", 0.25),
                                             ("1e-1", 0.1), ("-2", -2.0)])
def test_reward_txt_numbers(text, value):
    assert parse_reward_txt(text) == {"reward": value}


@pytest.mark.parametrize("text", ["", "banana", "1 2", "nan", "inf", "1.0.0", "true"])
def test_reward_txt_rejects_non_numbers(text):
    with pytest.raises(RewardInvalidError):
        parse_reward_txt(text)


def test_reward_json_headline_and_metrics():
    assert parse_reward_json('{"reward": 0.5, "exact": 1}') == {"reward": 0.5, "exact": 1.0}
    assert parse_reward_json('{"accuracy": 0.75}') == {"accuracy": 0.75, "reward": 0.75}


@pytest.mark.parametrize("text", ["[]", "{}", "1", '{"a": 1, "b": 2}', '{"reward": "1"}',
                                  '{"reward": true}', '{"reward": null}', "{", '{"reward": NaN}'])
def test_reward_json_rejects_bad_shapes(text):
    with pytest.raises(RewardInvalidError):
        parse_reward_json(text)


def test_read_rewards_prefers_json_and_reports_missing(tmp_path):
    with pytest.raises(RewardMissingError, match="reward.txt"):
        read_rewards(tmp_path)
    (tmp_path / "reward.txt").write_text("0")
    assert read_rewards(tmp_path) == {"reward": 0.0}
    (tmp_path / "reward.json").write_text('{"reward": 1}')
    assert read_rewards(tmp_path) == {"reward": 1.0}


@given(st.text())
def test_reward_txt_parser_only_raises_its_own_error(text):
    try:
        rewards = parse_reward_txt(text)
    except RewardInvalidError:
        return
    assert math.isfinite(rewards["reward"]) and rewards["reward"] == float(text.strip())


@given(st.dictionaries(st.text(max_size=8), st.floats(allow_nan=False, allow_infinity=False),
                       min_size=1, max_size=4))
def test_reward_json_round_trips_finite_maps(metrics):
    text = json.dumps(metrics)
    try:
        rewards = parse_reward_json(text)
    except RewardInvalidError:
        assert "reward" not in metrics and len(metrics) > 1
        return
    assert {k: v for k, v in rewards.items() if k in metrics} == metrics


@given(st.binary())
def test_reward_json_parser_never_leaks_foreign_errors(data):
    try:
        parse_reward_json(data.decode("utf-8", "replace"))
    except RewardInvalidError:
        pass
