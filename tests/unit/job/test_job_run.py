"""Whole jobs on fake sandboxes: aggregates, retries, cancellation, invalid tasks, agents."""

from __future__ import annotations

import json
import math

import anyio
import pytest

from benchflow.job.config import parse_job_config
from benchflow.job.models import JobResult
from benchflow.job.runner import make_job, prepare_job, start_new_job
from benchflow.job.store import iter_trial_results
from benchflow.rollout.events import RolloutEventKind
from benchflow.rollout.result import RolloutResult
from benchflow.trajectory import load
from tests.fakes.clock import wait_until

pytestmark = pytest.mark.anyio

FAST_RETRY = {"max_attempts": 3, "initial_delay_ms": 1, "max_delay_ms": 5}


def make_config(tmp_path, dataset, **extra):
    data = {"name": "job1", "jobs_dir": str(tmp_path / "jobs"), "retry": FAST_RETRY,
            "agents": [{"name": "oracle"}], "datasets": [{"path": str(dataset)}], **extra}
    return parse_job_config(data)


async def run_job(config, listener=None):
    prepared = prepare_job(config, lookup={"SECRET": "s3cret"}.get)
    start_new_job(prepared)
    job = make_job(prepared, listener=listener)
    return await job.run(), job, prepared


def read(path) -> RolloutResult:
    return RolloutResult.model_validate_json(path.read_text())


async def test_a_job_runs_every_trial_and_aggregates_them(tmp_path, dataset, behaviour):
    config = make_config(tmp_path, dataset, n_attempts=2, metrics=[{"type": "sum"}],
                         agents=[{"name": "oracle"},
                                 {"name": "cmd", "execute": "echo $SECRET", "install": "true",
                                  "env": {"API_KEY": "${SECRET}"}}])
    result, _, _ = await run_job(config)
    job_dir = tmp_path / "jobs" / "job1"
    trial_files = sorted(job_dir.glob("*/*/*/result.json"))
    assert len(trial_files) == 12
    assert {p.parent.relative_to(job_dir).as_posix() for p in trial_files} == {
        f"{a}/bench/{t}__{n}" for a in ("oracle", "cmd") for t in ("alpha", "bravo", "charlie")
        for n in (1, 2)}
    on_disk = JobResult.model_validate_json((job_dir / "result.json").read_text())
    assert on_disk == result
    assert (result.total_trials, result.completed_trials, result.failed_trials) == (12, 12, 0)
    assert (result.pass_rate, result.mean_reward, result.skipped_trials) == (1.0, 1.0, 0)
    assert result.pass_at_k == {"1": 1.0, "2": 1.0}
    assert result.metrics == {"sum": 12.0}
    assert set(result.agents) == {"oracle", "cmd"} and result.agents["cmd"].total_trials == 6
    assert not result.cancelled and behaviour.live == 0
    saved = json.loads((job_dir / "config.json").read_text())
    assert saved["agents"][1]["env"] == {"API_KEY": "${SECRET}"}
    assert "s3cret" not in (job_dir / "config.json").read_text()
    # the agent's env reached its scripts, through the exec environment
    envs = [env for argv, _, env in behaviour.execs if argv[-1].endswith("execute.sh")]
    assert len(envs) == 6 and all(e["API_KEY"] == "s3cret" for e in envs)
    assert all(e["ROLLOUT_TASK_INSTRUCTION"] == "/tmp/instruction.md" for e in envs)


async def test_infrastructure_failure_is_retried_with_errors_kept(tmp_path, dataset, behaviour):
    behaviour.start_failures = 1
    events = []
    config = make_config(tmp_path, dataset, datasets=[{"path": str(dataset), "tasks": ["alpha"]}])
    result, job, _ = await run_job(config, listener=events.append)
    (trial,) = job.results
    assert trial.error is None and trial.reward == 1.0
    assert [e.type for e in trial.retried_errors] == ["environment_start_failed"]
    assert "500" in trial.retried_errors[0].message
    root = tmp_path / "jobs" / "job1" / "oracle" / "bench" / "alpha__1"
    assert read(root / "result.json").retried_errors == trial.retried_errors
    assert (root / "retries" / "1" / "error.txt").exists()
    assert read(root / "retries" / "1" / "result.json").error.type == "environment_start_failed"
    ends = [e for e in events if e.kind is RolloutEventKind.END]
    assert len(ends) == 1 and ends[0].result.error is None  # one trial, counted once
    assert result.completed_trials == 1 and result.failed_trials == 0


async def test_retries_stop_at_max_attempts(tmp_path, dataset, behaviour):
    behaviour.start_failures = 10
    config = make_config(tmp_path, dataset, datasets=[{"path": str(dataset), "tasks": ["alpha"]}])
    _, job, _ = await run_job(config)
    (trial,) = job.results
    assert trial.error is not None and trial.error.type == "environment_start_failed"
    # max_attempts 3 = three retries after the first try: four tries in all
    assert len(trial.retried_errors) == 3 and behaviour.start_failures == 6


async def test_a_failure_that_would_repeat_is_not_retried(tmp_path, dataset, behaviour):
    behaviour.start_failures = 10
    behaviour.start_failure_transient = False
    config = make_config(tmp_path, dataset, datasets=[{"path": str(dataset), "tasks": ["alpha"]}])
    _, job, _ = await run_job(config)
    (trial,) = job.results
    assert trial.error is not None and not trial.error.retryable
    assert trial.retried_errors == [] and behaviour.start_failures == 9


async def test_max_attempts_zero_turns_retries_off(tmp_path, dataset, behaviour):
    behaviour.start_failures = 10
    config = make_config(tmp_path, dataset, retry={**FAST_RETRY, "max_attempts": 0},
                         datasets=[{"path": str(dataset), "tasks": ["alpha"]}])
    _, job, _ = await run_job(config)
    (trial,) = job.results
    assert trial.error is not None and trial.error.retryable
    assert trial.retried_errors == [] and behaviour.start_failures == 9


async def test_agent_failure_is_never_retried_and_skips_the_verifier(tmp_path, dataset,
                                                                     behaviour):
    behaviour.exit_codes = {"execute.sh": 3}
    config = make_config(tmp_path, dataset, agents=[{"name": "cmd", "execute": "exit 3"}],
                         datasets=[{"path": str(dataset), "tasks": ["alpha"]}])
    result, job, _ = await run_job(config)
    (trial,) = job.results
    assert trial.error is not None and trial.error.type == "agent_execution_failed"
    assert trial.retried_errors == [] and behaviour.starts == 1
    assert not any("test.sh" in " ".join(argv) for argv, _, _ in behaviour.execs)
    assert (result.failed_trials, result.completed_trials) == (1, 0)


async def test_an_invalid_task_is_a_trial_without_a_sandbox(tmp_path, dataset, behaviour):
    (dataset / "bravo" / "verifier" / "test.sh").unlink()
    result, job, _ = await run_job(make_config(tmp_path, dataset))
    errors = {r.task_name: r.error.type if r.error else None for r in job.results}
    assert errors == {"alpha": None, "bravo": "task_invalid", "charlie": None}
    assert behaviour.starts == 2 and len(behaviour.sandboxes) == 2
    assert result.failed_trials == 1 and result.total_trials == 3


async def test_cancel_stops_running_trials_and_skips_queued_ones(tmp_path, dataset, behaviour):
    behaviour.delay_sec = math.inf  # agents run until cancelled
    config = make_config(tmp_path, dataset, n_attempts=2, n_concurrent_trials=2)
    prepared = prepare_job(config)
    start_new_job(prepared)
    job = make_job(prepared)
    async with anyio.create_task_group() as tg:
        async def cancel_when_busy() -> None:
            await wait_until(lambda: behaviour.running == 2, "two trials in their agent phase")
            job.cancel()
        tg.start_soon(cancel_when_busy)
        result = await job.run()
    assert result.cancelled and behaviour.live == 0
    assert (result.total_trials, result.skipped_trials, len(result.skipped)) == (6, 4, 4)
    assert [r.error.type for r in job.results] == ["cancelled", "cancelled"]
    assert {s.task_name for s in result.skipped} >= {"bravo", "charlie"}
    on_disk = JobResult.model_validate_json((tmp_path / "jobs/job1/result.json").read_text())
    assert on_disk.cancelled and on_disk.skipped == result.skipped
    assert len(list(iter_trial_results(tmp_path / "jobs" / "job1"))) == 2


async def test_cancelling_the_caller_still_writes_the_job_result(tmp_path, dataset, behaviour):
    behaviour.delay_sec = math.inf
    prepared = prepare_job(make_config(tmp_path, dataset))
    job = make_job(prepared)
    async with anyio.create_task_group() as tg:
        tg.start_soon(job.run)
        await wait_until(lambda: behaviour.running > 0, "a trial in its agent phase")
        tg.cancel_scope.cancel()
    saved = JobResult.model_validate_json((tmp_path / "jobs/job1/result.json").read_text())
    assert saved.cancelled and saved.total_trials == 3 and behaviour.live == 0


# -- the command agent ------------------------------------------------------------------------


async def test_command_agent_outputs_env_and_trajectory(tmp_path, dataset, behaviour):
    config = make_config(tmp_path, dataset, datasets=[{"path": str(dataset), "tasks": ["alpha"]}],
                         agents=[{"name": "cmd", "install": "echo in", "execute": "echo ex",
                                  "env": {"MODEL": "m1"}}], instruction_path="/work/i.md")
    _, job, _ = await run_job(config)
    (trial,) = job.results
    assert trial.error is None and trial.reward == 1.0
    root = tmp_path / "jobs" / "job1" / "cmd" / "bench" / "alpha__1"
    assert (root / "setup" / "stdout.txt").read_text() == "ok\n"
    assert (root / "command" / "stdout.txt").read_text() == "ok\n"
    assert (root / "command" / "stderr.txt").exists()
    (sandbox,) = behaviour.sandboxes
    assert sandbox.files["/tmp/.benchflow/agents/cmd/install.sh"] == b"echo in"
    assert sandbox.files["/tmp/.benchflow/agents/cmd/execute.sh"] == b"echo ex"
    assert sandbox.files["/work/i.md"].decode().startswith("Write hello for alpha")
    install = next(c for c in behaviour.execs if c[0][-1].endswith("install.sh"))
    execute = next(c for c in behaviour.execs if c[0][-1].endswith("execute.sh"))
    assert install[1] == "root" and install[2]["MODEL"] == "m1"
    assert execute[2]["ROLLOUT_TASK_INSTRUCTION"] == "/work/i.md"
    events = [e for e in load(root / "trajectory" / "acp_trajectory.jsonl")
              if e.type == "command"]
    assert len(events) == 1 and events[0].exit_code == 0 and events[0].role == "agent"


@pytest.mark.parametrize(("exit_codes", "delay", "expected"), [
    ({"install.sh": 1}, 0, "agent_install_failed"),
    ({"execute.sh": 2}, 0, "agent_execution_failed"),
    ({"install.sh": 0}, 0.5, "agent_install_timeout"),
    ({}, 0.5, "agent_execution_timeout"),
])
async def test_command_agent_errors(tmp_path, dataset, behaviour, exit_codes, delay, expected):
    behaviour.exit_codes, behaviour.delay_sec = exit_codes, delay
    config = make_config(tmp_path, dataset, datasets=[{"path": str(dataset), "tasks": ["alpha"]}],
                         agents=[{"name": "cmd", "install": "x", "execute": "y"}],
                         timeout_multiplier=0.01)  # 30 s agent / 300 s install -> 0.3 s / 3 s
    if expected == "agent_install_timeout":
        config = config.model_copy(update={"timeout_multiplier": 0.001})
    _, job, _ = await run_job(config)
    (trial,) = job.results
    assert trial.error is not None and trial.error.type == expected, trial.error
    assert trial.reward is None and trial.retried_errors == []
