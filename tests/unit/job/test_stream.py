"""`benchflow.stream` on fake sandboxes: results as they finish, the job's files, retries,
and cancellation when the consumer stops."""

from __future__ import annotations

import gc

import pytest

import benchflow as bf
from benchflow.config import RolloutConfig, Scene
from benchflow.errors import ConfigError
from benchflow.job.config import parse_job_config
from benchflow.job.models import JobResult
from benchflow.rollout.result import RolloutResult
from tests.fakes.clock import wait_until

pytestmark = pytest.mark.anyio

FAST_RETRY = {"max_attempts": 2, "initial_delay_ms": 1, "max_delay_ms": 5}


def job_config(tmp_path, dataset, **extra):
    return parse_job_config({
        "name": "stream1", "jobs_dir": str(tmp_path / "jobs"), "retry": FAST_RETRY,
        "environment": {"type": "fake"}, "agents": [{"name": "oracle"}],
        "datasets": [{"path": str(dataset)}], **extra})


def saved(tmp_path, name: str = "stream1") -> JobResult:
    return JobResult.model_validate_json((tmp_path / "jobs" / name / "result.json").read_text())


async def test_every_trial_is_yielded_once_with_the_job_files(tmp_path, dataset, behaviour):
    behaviour.start_failures = 1  # one transient failure: its retried attempt is not yielded
    got: list[RolloutResult] = []
    async with bf.stream(job_config(tmp_path, dataset, n_attempts=2), concurrency=3) as results:
        async for result in results:
            got.append(result)
    assert sorted((r.task_name, r.attempt) for r in got) == [
        (t, n) for t in ("alpha", "bravo", "charlie") for n in (1, 2)]
    assert all(r.reward == 1.0 and r.error is None for r in got)
    assert sum(len(r.retried_errors) for r in got) == 1
    job_dir = tmp_path / "jobs" / "stream1"
    assert (job_dir / "config.json").exists() and (job_dir / "manifest.json").exists()
    on_disk = [RolloutResult.model_validate_json(p.read_text())
               for p in job_dir.glob("*/*/*/result.json")]
    assert sorted(r.rollout_name for r in on_disk) == sorted(r.rollout_name for r in got)
    assert results.result == saved(tmp_path)
    assert results.result.completed_trials == 6 and not results.result.cancelled
    assert behaviour.live == 0


async def test_leaving_the_block_early_cancels_and_cleans_up(tmp_path, dataset, behaviour):
    behaviour.hang_after = 1  # the first trial ends; the next one runs until cancelled
    async with bf.stream(job_config(tmp_path, dataset), concurrency=1) as results:
        async for first in results:
            break
    assert first.reward == 1.0
    # aclose() returned: the running trial was cancelled and its sandbox removed
    assert behaviour.live == 0
    result = saved(tmp_path)
    assert result.cancelled and result.completed_trials == 1
    assert result.skipped_trials + result.failed_trials == 2


async def test_a_dropped_stream_is_cancelled(tmp_path, dataset, behaviour):
    behaviour.hang_after = 1
    async for _ in bf.stream(job_config(tmp_path, dataset), concurrency=1):
        break
    gc.collect()
    # the job cancels on the loop, without the consumer waiting
    await wait_until(lambda: (tmp_path / "jobs" / "stream1" / "result.json").exists()
                     and behaviour.live == 0, "the job's result after cancelling")
    assert saved(tmp_path).cancelled and behaviour.live == 0


async def test_rollout_configs_stream_too(tmp_path, dataset, behaviour):
    configs = [RolloutConfig(task_path=dataset / name, scenes=[Scene.single(agent="oracle")],
                             environment="fake")
               for name in ("alpha", "bravo")]
    results = bf.stream(configs, concurrency=2, job_name="cfgs", jobs_dir=tmp_path / "jobs")
    names = sorted([r.task_name async for r in results])
    assert names == ["alpha", "bravo"]
    assert saved(tmp_path, "cfgs").completed_trials == 2


async def test_bad_input_fails_before_anything_runs(tmp_path, dataset, behaviour):
    with pytest.raises(ConfigError, match="RolloutConfig"):
        bf.stream([])
    with pytest.raises(ConfigError, match="nosuch"):
        bf.stream(job_config(tmp_path, dataset, agents=[{"name": "nosuch"}]))
    assert behaviour.starts == 0 and not (tmp_path / "jobs" / "stream1").exists()
