"""A full disk at any of a rollout's writes stops the job cleanly, whatever write it hits.

The disk "fills" at one chosen file of the second trial (its config.json, written as the
rollout opens, or its result.json, written as it ends): the job stops with
ResultsWriteError naming that file and `jobs resume`, logs no internal error (no
traceback on the console), removes every sandbox, starts no further trial, keeps the
first trial's result valid, and `jobs resume` then finishes the job. (The reliability
suite fills a real tmpfs, where the failing write depends on timing.)
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from benchflow.errors import ResultsWriteError
from benchflow.job.config import parse_job_config
from benchflow.job.models import JobResult
from benchflow.job.resume import prepare_resume, previous_start
from benchflow.job.runner import make_job, prepare_job, reset_unfinished, start_new_job
from benchflow.rollout import phases, rollout
from benchflow.rollout.result import RolloutResult, write_json_atomic

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("failing", ["config.json", "result.json"])
async def test_a_full_disk_at_one_write_stops_the_job_and_resume_finishes_it(
        tmp_path, dataset, behaviour, monkeypatch, caplog, failing):
    target = tmp_path / "jobs" / "job1" / "oracle" / "bench" / "bravo__1" / failing

    def full_at_target(path: Path, text: str, **kwargs: bool) -> None:
        if path == target:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        write_json_atomic(path, text, **kwargs)

    monkeypatch.setattr(phases, "write_json_atomic", full_at_target)
    monkeypatch.setattr(rollout, "write_json_atomic", full_at_target)
    prepared = prepare_job(parse_job_config({
        "name": "job1", "jobs_dir": str(tmp_path / "jobs"), "n_concurrent_trials": 1,
        "agents": [{"name": "oracle"}], "datasets": [{"path": str(dataset)}]}))
    start_new_job(prepared)
    job_dir = prepared.job_dir
    with caplog.at_level(logging.INFO), pytest.raises(ResultsWriteError) as stopped:
        await make_job(prepared).run()

    assert str(target) in str(stopped.value) and "benchflow jobs resume" in str(stopped.value)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert behaviour.live == 0 and behaviour.starts <= 2  # charlie never started
    alpha = RolloutResult.model_validate_json(
        (job_dir / "oracle" / "bench" / "alpha__1" / "result.json").read_text())
    assert alpha.error is None and alpha.reward == 1.0
    stopped_trial = target.parent / "result.json"
    if stopped_trial.exists():  # written when the disk had room again: resume reruns it
        error = RolloutResult.model_validate_json(stopped_trial.read_text()).error
        assert error is not None and error.retryable, error
    assert not list(job_dir.rglob("*.tmp"))

    monkeypatch.setattr(phases, "write_json_atomic", write_json_atomic)  # room again
    monkeypatch.setattr(rollout, "write_json_atomic", write_json_atomic)
    resumed = prepare_resume(job_dir)
    assert [t.rollout_name for t in resumed.to_run] == ["oracle/bench/bravo__1",
                                                      "oracle/bench/charlie__1"]
    reset_unfinished(resumed)
    job = make_job(resumed)
    job.started_at = previous_start(job_dir)
    final = await job.run()
    assert (final.total_trials, final.completed_trials, final.failed_trials) == (3, 3, 0)
    assert JobResult.model_validate_json((job_dir / "result.json").read_text()) == final
