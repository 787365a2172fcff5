"""Resume: only unfinished trials run, a changed job is refused, a job folder runs once."""

from __future__ import annotations

import json
import os

import pytest

from benchflow.errors import ConfigError
from benchflow.job.config import parse_job_config
from benchflow.job.resume import is_final, prepare_resume, previous_start
from benchflow.job.runner import make_job, prepare_job, reset_unfinished, start_new_job
from benchflow.job.store import job_lock
from benchflow.rollout.result import ErrorInfo, RolloutResult

pytestmark = pytest.mark.anyio


def make_config(tmp_path, dataset, **extra):
    return parse_job_config({"name": "job1", "jobs_dir": str(tmp_path / "jobs"),
                             "agents": [{"name": "oracle"}], "datasets": [{"path": str(dataset)}],
                             **extra})


async def first_run(tmp_path, dataset, **extra):
    prepared = prepare_job(make_config(tmp_path, dataset, **extra))
    start_new_job(prepared)
    result = await make_job(prepared).run()
    return prepared.job_dir, result


def trial(job_dir, task, agent="oracle", attempt=1):
    return job_dir / agent / "bench" / f"{task}__{attempt}" / "result.json"


def rewrite(path, **changes):
    result = RolloutResult.model_validate_json(path.read_text())
    path.write_text(result.model_copy(update=changes).model_dump_json())


async def test_resume_runs_exactly_the_unfinished_trials(tmp_path, dataset, behaviour):
    job_dir, first = await first_run(tmp_path, dataset)
    assert behaviour.starts == 3
    trial(job_dir, "alpha").unlink()  # never finished
    text = trial(job_dir, "bravo").read_text()
    trial(job_dir, "bravo").write_text(text[: len(text) // 2])  # a crash mid-write
    charlie = trial(job_dir, "charlie").read_bytes()
    prepared = prepare_resume(job_dir)
    assert [t.rollout_name for t in prepared.to_run] == ["oracle/bench/alpha__1",
                                                       "oracle/bench/bravo__1"]
    assert [r.task_name for r in prepared.finished] == ["charlie"]
    reset_unfinished(prepared)
    job = make_job(prepared)
    job.started_at = previous_start(job_dir)
    result = await job.run()
    assert behaviour.starts == 5  # two more, not three
    assert sorted(r.task_name for r in job.results) == ["alpha", "bravo"]
    assert trial(job_dir, "charlie").read_bytes() == charlie
    assert (result.total_trials, result.completed_trials, result.skipped_trials) == (3, 3, 0)
    assert result.started_at == first.started_at
    again = prepare_resume(job_dir)
    assert again.to_run == [] and len(again.finished) == 3


async def test_cancelled_and_errored_trials(tmp_path, dataset, behaviour):
    job_dir, _ = await first_run(tmp_path, dataset)
    rewrite(trial(job_dir, "alpha"), error=ErrorInfo(type="cancelled", message="c"), reward=None)
    rewrite(trial(job_dir, "bravo"), error=ErrorInfo(type="verifier_failed", message="v"),
            reward=None)
    rewrite(trial(job_dir, "charlie"),
            error=ErrorInfo(type="environment_teardown_failed", message="t"))
    assert [t.ref.task_name for t in prepare_resume(job_dir).to_run] == ["alpha"]
    assert [t.ref.task_name for t in prepare_resume(job_dir, retry_errors=True).to_run] == [
        "alpha", "bravo"]


def test_is_final():
    base = RolloutResult(job_name="j", rollout_name="r", task_name="t", dataset_name="d",
                         agent_name="a", attempt=1)
    assert is_final(base) and is_final(base, retry_errors=True)
    failed = base.model_copy(update={"error": ErrorInfo(type="agent_execution_failed",
                                                        message="m")})
    assert is_final(failed) and not is_final(failed, retry_errors=True)
    # a transient infrastructure failure (a daemon restart) runs again by default
    lost = base.model_copy(update={"error": ErrorInfo(type="environment_exec_failed",
                                                      message="m", retryable=True)})
    assert not is_final(lost) and not is_final(lost, retry_errors=True)


async def test_resume_refuses_changed_tasks_agents_and_models(tmp_path, dataset, behaviour,
                                                               monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-dummy")  # the claude-code variant below
    job_dir, _ = await first_run(tmp_path, dataset, agents=[{"name": "cmd", "execute": "true"},
                                                            {"name": "oracle"}])
    (dataset / "alpha" / "oracle" / "solve.sh").write_text("#!/bin/bash\necho changed\n")
    with pytest.raises(ConfigError) as info:
        prepare_resume(job_dir)
    assert "task contents changed: bench/alpha" in str(info.value)
    (dataset / "alpha" / "oracle" / "solve.sh").write_text("#!/bin/bash\necho hi\n")
    assert prepare_resume(job_dir).to_run == []

    other = tmp_path / "other.json"
    saved = json.loads((job_dir / "config.json").read_text())
    saved["agents"][0]["execute"] = "false"
    saved["agents"].append({"name": "claude-code", "model": "m"})
    saved["n_attempts"] = 2
    other.write_text(json.dumps(saved))
    with pytest.raises(ConfigError) as info:
        prepare_resume(job_dir, config_file=other)
    message = str(info.value)
    for expected in ("n_attempts 1 -> 2", "agent 'cmd' definition changed",
                     "agent 'claude-code' added", "start a new job"):
        assert expected in message


async def test_resume_needs_the_job_file_when_secrets_were_redacted(tmp_path, dataset, behaviour):
    job_dir, _ = await first_run(tmp_path, dataset, agents=[
        {"name": "cmd", "execute": "true", "env": {"API_KEY": "literal-secret"}}])
    assert "literal-secret" not in (job_dir / "config.json").read_text()
    with pytest.raises(ConfigError, match=r"agents\[0\].env.API_KEY was saved redacted.*--config"):
        prepare_resume(job_dir)


def test_not_a_job_folder(tmp_path):
    with pytest.raises(ConfigError, match="no such job folder"):
        prepare_resume(tmp_path / "missing")
    with pytest.raises(ConfigError, match="only jobs started by"):
        prepare_resume(tmp_path)


async def test_a_job_name_is_used_once(tmp_path, dataset, behaviour):
    await first_run(tmp_path, dataset)
    with pytest.raises(ConfigError, match="already exists: resume it"):
        start_new_job(prepare_job(make_config(tmp_path, dataset)))


def test_job_lock_refuses_a_live_holder_and_takes_over_a_stale_one(tmp_path):
    job_dir = tmp_path / "job"
    with job_lock(job_dir):
        (job_dir / ".lock").write_text("1")  # pid 1 is alive
        with pytest.raises(ConfigError, match="already running"), job_lock(job_dir):
            pass
        (job_dir / ".lock").write_text(str(os.getpid()))
    assert not (job_dir / ".lock").exists()
    (job_dir / ".lock").write_text("999999999")  # no such process
    with job_lock(job_dir):
        assert (job_dir / ".lock").read_text() == str(os.getpid())
