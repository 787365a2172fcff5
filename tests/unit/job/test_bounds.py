"""Bounds: numbers outside their documented range are one clear error, before any work;
a cancelled job has no pass@k."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchflow import bounds
from benchflow.errors import ConfigError, TaskInvalidError
from benchflow.job.config import parse_job_config
from benchflow.job.datasets import resolve_datasets
from benchflow.job.models import build_job_result
from benchflow.job.plan import plan_trials
from benchflow.rollout.result import ErrorInfo, RolloutResult
from benchflow.task import load_task

from .conftest import write_task

MINIMAL = {"agents": [{"name": "nop"}], "datasets": [{"path": "tasks"}]}


@pytest.mark.parametrize(("field", "value", "says"), [
    ("n_attempts", 100_000_000, f"less than or equal to {bounds.MAX_ATTEMPTS}"),
    ("n_concurrent_trials", 10**9, "less than or equal to"),
    ("timeout_multiplier", float("inf"), "finite"),
    ("retry", {"max_attempts": 10**6}, "retry.max_attempts"),
    ("environment", {"override_memory_mb": int("9" * 401)}, "environment.override_memory_mb"),
    ("verifier", {"max_timeout_sec": 10**12}, "verifier.max_timeout_sec"),
])
def test_job_numbers_beyond_their_range_are_one_line_errors(field, value, says):
    with pytest.raises(ConfigError) as caught:
        parse_job_config({**MINIMAL, field: value}, "job.yaml")
    message = str(caught.value)
    assert message.startswith("job.yaml: invalid job file: ") and "\n" not in message
    assert field in message and says in message


def test_too_many_trials_are_refused_before_planning(tmp_path: Path, monkeypatch):
    for name in ("a", "b", "c"):
        write_task(tmp_path / "bench", name)
    config = parse_job_config({"agents": [{"name": "nop"}, {"name": "oracle"}],
                               "datasets": [{"path": str(tmp_path / "bench")}],
                               "n_attempts": bounds.MAX_ATTEMPTS}, "job.yaml")
    datasets = resolve_datasets(config)
    monkeypatch.setattr("benchflow.job.plan.MAX_TRIALS", 59_999)  # 2 agents x 3 tasks x 10,000
    with pytest.raises(ConfigError, match="60,000 trials .* more than 59,999"):
        plan_trials(config, datasets)


@pytest.mark.parametrize(("frontmatter", "says"), [
    ("sandbox: {memory_mb: " + "9" * 401 + "}", "sandbox.memory_mb"),
    ("sandbox: {cpus: 100000}", "sandbox.cpus"),
    ("agent: {timeout_sec: 1e12}", "agent.timeout_sec"),
    ("sandbox: {pids_limit: 1}", "sandbox.pids_limit"),
    ("sandbox: {gpus: 1000}", "sandbox.gpus"),
])
def test_task_numbers_beyond_their_range_are_errors(tmp_path: Path, frontmatter, says):
    task = write_task(tmp_path, "t")
    (task / "task.md").write_text(f"---\n{frontmatter}\n---\nDo it.\n")
    with pytest.raises(TaskInvalidError) as caught:
        load_task(task)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_a_legacy_memory_of_401_digits_is_an_error(tmp_path: Path):
    task = write_task(tmp_path, "t")
    (task / "task.md").unlink()
    (task / "task.toml").write_text("[environment]\nmemory_mb = " + "9" * 401 + "\n")
    (task / "instruction.md").write_text("Do it.\n")
    (task / "verifier").rename(task / "tests")
    with pytest.raises(TaskInvalidError, match="memory_mb"):
        load_task(task)


def test_unknown_keys_are_errors_unless_strict_false(tmp_path: Path):
    with pytest.raises(ConfigError, match="n_attemps: unknown key"):
        parse_job_config({**MINIMAL, "n_attemps": 2}, "job.yaml")
    with pytest.warns(UserWarning) as record:
        config = parse_job_config({**MINIMAL, "n_attemps": 2, "strict": False,
                                   "agents": [{"name": "nop", "colour": "red"}]}, "job.yaml")
    assert sorted(str(w.message) for w in record) == [
        "job.yaml: unknown key 'agents[0].colour' ignored (strict: false)",
        "job.yaml: unknown key 'n_attemps' ignored (strict: false)"]
    assert config.n_attempts == 1 and not config.strict
    task = write_task(tmp_path, "t")
    (task / "task.md").write_text("---\nsandbox: {cpuz: 2}\n---\nDo it.\n")
    with pytest.raises(TaskInvalidError, match="cpuz"):
        load_task(task)
    (task / "task.md").write_text("---\nstrict: false\nsandbox: {cpuz: 2, cpus: 2}\n---\nDo.\n")
    with pytest.warns(UserWarning, match=r"unknown key 'sandbox.cpuz' ignored"):
        assert load_task(task).config.sandbox.cpus == 2


def _result(task: str, attempt: int, error: str | None, reward: float | None) -> RolloutResult:
    return RolloutResult(job_name="j", rollout_name=f"{task}{attempt}", task_name=task,
                         dataset_name="d", agent_name="a", attempt=attempt, reward=reward,
                         error=None if error is None else ErrorInfo(type=error, message="m"))


def test_a_cancelled_job_has_no_pass_at_k():
    now = datetime.now(UTC)
    cancelled = [_result("t", i, "cancelled", None) for i in (1, 2)]
    job = build_job_result("j", cancelled, [], cancelled=True, started_at=now, ended_at=now)
    assert job.pass_at_k is None and job.pass_rate is None
    partly = [*cancelled, _result("u", 1, None, 1.0), _result("u", 2, None, 0.0)]
    job = build_job_result("j", partly, [], cancelled=True, started_at=now, ended_at=now)
    assert job.pass_at_k == {"1": 0.5, "2": 1.0}  # only u's two scored attempts count
