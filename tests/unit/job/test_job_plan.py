"""Rollout planning: the product, its order, and the job settings each rollout gets."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from benchflow.agents.command import CommandAgent
from benchflow.errors import ConfigError, RolloutCancelled, SandboxTeardownError
from benchflow.job.config import RetryConfig, parse_job_config
from benchflow.job.datasets import resolve_datasets
from benchflow.job.plan import agent_scenes, plan_trials
from benchflow.job.retry import RetryPolicy
from benchflow.rollout.result import ErrorInfo, RolloutResult


def config_for(dataset, **extra):
    return parse_job_config({"name": "j", "agents": [{"name": "oracle"},
                                                     {"name": "cmd", "execute": "true"}],
                             "datasets": [{"path": str(dataset)}], **extra})


def test_trials_are_agents_x_tasks_x_attempts_in_order(dataset):
    config = config_for(dataset, n_attempts=2)
    trials = plan_trials(config, resolve_datasets(config))
    assert len(trials) == 2 * 3 * 2
    assert [t.rollout_name for t in trials[:4]] == [
        "oracle/bench/alpha__1", "oracle/bench/alpha__2", "oracle/bench/bravo__1",
        "oracle/bench/bravo__2"]
    assert trials[-1].rollout_name == "cmd/bench/charlie__2"
    assert len({t.rollout_name for t in trials}) == 12
    assert trials[0].drivers == {}
    driver = trials[-1].drivers["cmd"]
    assert isinstance(driver, CommandAgent) and driver.execute == "true"


def test_job_settings_reach_every_rollout(dataset):
    config = config_for(dataset, timeout_multiplier=2.5, instruction_path="/i.md",
                        environment={"force_build": True, "preserve_env": "on_failure",
                                     "override_cpus": 2, "override_memory_mb": 1024,
                                     "override_storage_mb": 4096,
                                     "provider_config": {"network": "net"}},
                        verifier={"override_timeout_sec": 50, "max_timeout_sec": 30,
                                  "disable": True})
    rollout = plan_trials(config, resolve_datasets(config))[0].config
    assert (rollout.timeout_multiplier, rollout.instruction_path) == (2.5, "/i.md")
    assert (rollout.force_build, rollout.preserve_env) == (True, "on_failure")
    assert (rollout.override_cpus, rollout.override_memory_mb, rollout.override_storage_mb) == (
        2, 1024, 4096)
    assert rollout.provider_config == {"network": "net"}
    assert rollout.verifier_disabled is True
    assert rollout.verifier_timeout_sec == 30  # min(override 50, max 30); x2.5 in the rollout
    assert (rollout.job_name, rollout.dataset_name, rollout.attempt) == ("j", "bench", 1)


@pytest.mark.parametrize(("verifier", "expected"), [
    ({}, None), ({"override_timeout_sec": 0}, None), ({"override_timeout_sec": 45}, 45),
    ({"max_timeout_sec": 5}, 5), ({"max_timeout_sec": 100}, 20)])
def test_verifier_timeout_override_and_ceiling(dataset, verifier, expected):
    config = config_for(dataset, verifier=verifier)  # the tasks' own timeout is 20 s
    assert plan_trials(config, resolve_datasets(config))[0].config.verifier_timeout_sec == expected


def test_registered_agents_map_to_scenes(tmp_path):
    config = parse_job_config({"agents": [{"name": "claude-code", "model": "sonnet",
                                           "env": {"X": "1"}}], "datasets": [{"path": "t"}]})
    (scene,) = agent_scenes(config.agents[0], {"X": "1"})
    assert scene.roles[0].agent == "claude-code" and scene.roles[0].model == "sonnet"
    assert scene.roles[0].env == {"X": "1"}
    scenes_file = tmp_path / "scenes.yaml"
    scenes_file.write_text(yaml.safe_dump([{
        "name": "pair", "roles": [{"name": "coder", "agent": "claude-code"},
                                  {"name": "reviewer", "agent": "codex", "model": "gpt"}],
        "turns": [{"role": "coder"}, {"role": "reviewer", "prompt": "review"}]}]))
    config = parse_job_config({"agents": [{"name": "claude-code", "model": "sonnet",
                                           "scenes": str(scenes_file)}],
                               "datasets": [{"path": "t"}]})
    (scene,) = agent_scenes(config.agents[0])
    assert [(r.agent, r.model) for r in scene.roles] == [("claude-code", "sonnet"),
                                                          ("codex", "gpt")]
    scenes_file.write_text("- name: x\n  roles: []\n")
    with pytest.raises(ConfigError, match=r"scene \[0\]"):
        agent_scenes(config.agents[0])


# -- retry policy ---------------------------------------------------------------------------


def result_with(error: str | None, retryable: bool = False) -> RolloutResult:
    return RolloutResult(job_name="j", rollout_name="a/d/t__1", task_name="t", dataset_name="d",
                         agent_name="a", attempt=1,
                         error=ErrorInfo(type=error, message="m", retryable=retryable)
                         if error else None)


def test_only_transient_infrastructure_errors_are_retried():
    policy = RetryPolicy(max_attempts=3)  # three retries after the first try
    transient = result_with("environment_start_failed", retryable=True)
    assert [policy.should_retry(transient, n) for n in (1, 2, 3, 4)] == [True, True, True, False]
    assert not policy.should_retry(result_with("environment_build_failed"), 1)
    assert not policy.should_retry(result_with("environment_image_pull_failed"), 1)
    # what says so is the exception's class (errors.py), recorded as the error is
    for exc in (SandboxTeardownError("t", transient=True), RolloutCancelled("c")):
        error = ErrorInfo.from_exception(exc)
        assert not error.retryable and not policy.should_retry(
            result_with(error.type).model_copy(update={"error": error}), 1), exc
    for kind in ("agent_execution_failed", "agent_install_failed", "verifier_failed",
                 "verifier_timeout", "internal_error", "task_invalid", "config_invalid", None):
        assert not policy.should_retry(result_with(kind), 1), kind


def test_backoff_is_exponential_and_capped():
    policy = RetryPolicy.from_config(RetryConfig(max_attempts=6, initial_delay_ms=1000,
                                                 max_delay_ms=5000, multiplier=2.0))
    assert [policy.delay_sec(n) for n in range(1, 6)] == [1.0, 2.0, 4.0, 5.0, 5.0]


@given(st.integers(0, 10_000), st.integers(0, 60_000), st.floats(1.0, 10.0), st.integers(1, 30))
def test_backoff_never_exceeds_the_cap_and_never_shrinks(initial, cap, multiplier, n):
    policy = RetryPolicy.from_config(RetryConfig(initial_delay_ms=initial, max_delay_ms=cap,
                                                 multiplier=multiplier))
    assert 0 <= policy.delay_sec(n) <= cap / 1000
    assert policy.delay_sec(n) <= policy.delay_sec(n + 1) + 1e-9
