"""Result models: JSON round trips, error mapping, job aggregates, secret redaction."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from benchflow.errors import ERROR_TYPES, AgentTimeout, SandboxBuildError, VerifierFailed
from benchflow.job.models import aggregate, build_job_result
from benchflow.rollout.result import ErrorInfo, RolloutResult
from benchflow.rollout.secrets import redact

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def result(task="t", agent="a", attempt=1, reward=None, error=None, cost=None) -> RolloutResult:
    return RolloutResult(job_name="j", rollout_name=f"{agent}/d/{task}__{attempt}", task_name=task,
                         dataset_name="d", agent_name=agent, attempt=attempt, reward=reward,
                         error=ErrorInfo(type=error, message="m") if error else None, cost=cost)


@given(reward=st.none() | st.floats(0, 1), attempt=st.integers(1, 50),
       error=st.none() | st.sampled_from(ERROR_TYPES), cost=st.none() | st.floats(0, 10))
def test_rollout_result_round_trips(reward, attempt, error, cost):
    r = result(reward=reward, attempt=attempt, error=error, cost=cost)
    r.timestamps.started_at = T0
    assert RolloutResult.model_validate_json(r.model_dump_json()) == r


def test_error_info_from_exceptions():
    assert ErrorInfo.from_exception(AgentTimeout("agent", 5)).type == "agent_execution_timeout"
    assert ErrorInfo.from_exception(SandboxBuildError("x")).type == "environment_build_failed"
    assert ErrorInfo.from_exception(VerifierFailed("exit 1"), "verifier").phase == "verifier"
    internal = ErrorInfo.from_exception(KeyError("boom"))
    assert internal.type == "internal_error" and "KeyError" in internal.message


def test_aggregates_follow_the_job_spec_definitions():
    results = [
        result("a", reward=1.0), result("b", reward=0.0), result("c", reward=0.5, cost=0.25),
        result("d", error="agent_execution_failed"),
        result("e", reward=1.0, error="environment_teardown_failed"),  # still completed
        result("f", error="environment_teardown_failed"),  # neither completed nor failed
    ]
    agg = aggregate(results, skipped=2)
    assert (agg.total_trials, agg.completed_trials, agg.failed_trials, agg.skipped_trials) == (8, 4, 1, 2)
    assert agg.pass_rate == 0.5  # a and e of the four completed
    assert agg.mean_reward == (1.0 + 0.0 + 0.5 + 1.0) / 4
    assert agg.total_cost == 0.25


def test_pass_at_k_uses_all_attempts():
    results = [result("t", attempt=1, reward=0.0), result("t", attempt=2, reward=1.0),
               result("u", attempt=1, reward=0.0), result("u", attempt=2, reward=0.0)]
    job = build_job_result("j", results, [], cancelled=False, started_at=T0, ended_at=T0)
    assert job.pass_at_k == {"1": 0.25, "2": 0.5}
    assert list(json.loads(job.model_dump_json()))[:3] == ["schema_version", "job_name", "cancelled"]


def test_redact_hides_secret_env_values_only():
    config = {"scenes": [{"roles": [{"env": {"OPENAI_API_KEY": "sk-1", "MODEL": "gpt",
                                             "GITHUB_TOKEN": "t", "MY_SECRET": "s"}}]}]}
    env = redact(config)["scenes"][0]["roles"][0]["env"]
    assert env == {"OPENAI_API_KEY": "***", "MODEL": "gpt", "GITHUB_TOKEN": "***", "MY_SECRET": "***"}


def test_redact_touches_env_mappings_only_and_keeps_references():
    data = {"model_endpoint": {"api_key_env": "MY_KEY"},
            "agents": [{"env": {"API_KEY": "sk-live", "TOKEN": "${TOKEN}", "MODE": "x"}}]}
    out = redact(data, keep=lambda v: v.startswith("${"))
    assert out["model_endpoint"] == {"api_key_env": "MY_KEY"}
    assert out["agents"][0]["env"] == {"API_KEY": "***", "TOKEN": "${TOKEN}", "MODE": "x"}
