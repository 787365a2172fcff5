"""Jobs on real Docker: layout and aggregates, registries over git, filter errors,
retries at the Docker boundary, SIGINT to a real `benchflow` process, and resume."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest
import requests
import yaml

from benchflow.cli.jobs import run_job_file
from benchflow.job.models import JobResult, aggregate
from benchflow.rollout.result import RolloutResult

from .conftest import TASKS, job_containers, reap

pytestmark = pytest.mark.docker

BENCHFLOW = Path(sys.executable).parent / "benchflow"

COMMAND_AGENT = {
    "name": "cmd",
    "description": "writes hello.txt",
    "install": "set -e\necho \"installing $AGENT_LABEL\"\nmkdir -p /opt/agent\n"
               "echo ok > /opt/agent/installed\n",
    "execute": "set -e\ntest -f /opt/agent/installed\n"
               "echo \"instruction at $ROLLOUT_TASK_INSTRUCTION\"\n"
               "head -c 80 \"$ROLLOUT_TASK_INSTRUCTION\"\n"
               "echo 'Hello, world!' > /app/hello.txt\n"
               "echo \"$AGENT_LABEL\" > /logs/agent/label.txt\n",
    "env": {"AGENT_LABEL": "${BF_TEST_LABEL}", "API_TOKEN": "literal-secret"},
}


def write_job(path: Path, **data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def trial_results(job_dir: Path) -> list[RolloutResult]:
    return [RolloutResult.model_validate_json(p.read_text())
            for p in sorted(job_dir.glob("*/*/*/result.json"))]


def test_two_agents_three_tasks_two_attempts(tmp_path, job_name, monkeypatch):
    monkeypatch.setenv("BF_TEST_LABEL", "label-42")
    job_file = write_job(
        tmp_path / "job.yaml", name=job_name, jobs_dir=str(tmp_path / "jobs"), n_attempts=2,
        n_concurrent_trials=4, metrics=[{"type": "mean"}, {"type": "min"}],
        agents=[{"name": "oracle"}, COMMAND_AGENT],
        datasets=[{"path": str(TASKS), "tasks": ["hello-world", "hello-world-legacy",
                                                 "fix-python-bug"]}])
    assert run_job_file(job_file) == 0
    job_dir = tmp_path / "jobs" / job_name
    dirs = {p.relative_to(job_dir).as_posix() for p in job_dir.glob("*/*/*") if p.is_dir()}
    assert dirs == {f"{a}/tasks/{t}__{n}" for a in ("oracle", "cmd")
                    for t in ("hello-world", "hello-world-legacy", "fix-python-bug")
                    for n in (1, 2)}
    results = trial_results(job_dir)
    assert len(results) == 12 and all(r.error is None for r in results)
    rewards = {(r.agent_name, r.task_name): r.reward for r in results}
    assert rewards[("cmd", "fix-python-bug")] == 0.0 and rewards[("cmd", "hello-world")] == 1.0
    assert all(re.fullmatch(r"[0-9a-f]{40}", r.task_git_commit_id or "") for r in results)

    # the job's aggregates, recomputed from the trial files
    job = JobResult.model_validate_json((job_dir / "result.json").read_text())
    expected = aggregate(results)
    for key in ("total_trials", "completed_trials", "failed_trials", "pass_rate", "mean_reward",
                "pass_at_k"):
        assert getattr(job, key) == getattr(expected, key), key
    assert (job.total_trials, job.completed_trials, job.pass_rate) == (12, 12, 10 / 12)
    assert job.agents["oracle"].mean_reward == 1.0
    assert job.agents["cmd"] == aggregate([r for r in results if r.agent_name == "cmd"])
    assert job.pass_at_k is not None and set(job.pass_at_k) == {"1", "2"}
    assert job.metrics == {"mean": 10 / 12, "min": 0.0}
    assert len(job.results) == 12 and not job.cancelled
    assert job.ended_at >= max(r.timestamps.ended_at for r in results)

    cmd = job_dir / "cmd" / "tasks" / "hello-world__1"
    assert "installing label-42" in (cmd / "setup" / "stdout.txt").read_text()
    assert "instruction at /tmp/instruction.md" in (cmd / "command" / "stdout.txt").read_text()
    assert (cmd / "logs" / "agent" / "label.txt").read_text().strip() == "label-42"
    assert (cmd / "logs" / "verifier" / "reward.txt").read_text().strip() == "1"
    saved = json.loads((job_dir / "config.json").read_text())
    assert saved["agents"][1]["env"] == {"AGENT_LABEL": "${BF_TEST_LABEL}", "API_TOKEN": "***"}
    assert "literal-secret" not in json.dumps([p.read_text() for p in job_dir.rglob("*.json")])


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def test_registry_task_from_a_local_git_repository_at_a_pinned_commit(tmp_path, job_name,
                                                                      monkeypatch):
    monkeypatch.setenv("BENCHFLOW_CACHE_DIR", str(tmp_path / "cache"))
    repo = tmp_path / "repo"
    shutil.copytree(TASKS / "hello-world", repo / "tasks" / "hello-world")
    git("init", "-q", "-b", "main", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "good", cwd=repo)
    good = git("rev-parse", "HEAD", cwd=repo)
    (repo / "tasks" / "hello-world" / "oracle" / "solve.sh").write_text("#!/bin/bash\nexit 1\n")
    git("commit", "-qam", "broken", cwd=repo)
    registry = tmp_path / "registry.json"
    entry = {"name": "hello-world", "git_url": f"file://{repo}", "path": "tasks/hello-world"}
    registry.write_text(json.dumps([
        {"name": "demo", "version": "1.0", "tasks": [{**entry, "git_commit_id": good}]},
        {"name": "demo", "version": "2.0", "tasks": [entry]},
    ]))
    job_file = write_job(tmp_path / "job.yaml", name=job_name, jobs_dir=str(tmp_path / "jobs"),
                         agents=[{"name": "oracle"}],
                         datasets=[{"registry": {"path": str(registry)}, "name": "demo",
                                    "version": "1.0", "tasks": ["hello-world"]}])
    assert run_job_file(job_file) == 0
    (result,) = trial_results(tmp_path / "jobs" / job_name)
    assert (result.dataset_name, result.task_name, result.reward) == ("demo", "hello-world", 1.0)
    assert result.task_git_commit_id == good
    assert (tmp_path / "cache" / "git").is_dir()


@pytest.mark.parametrize(("dataset", "message"), [
    ({"path": str(TASKS), "tasks": ["hello world"]}, "invalid task name(s) 'hello world'"),
    ({"path": str(TASKS), "tasks": ["-x"]}, "invalid task name(s) '-x'"),
    ({"path": str(TASKS), "tasks": ["hello-world", "nope", "nada"]}, "'nope', 'nada'"),
    ({"path": str(TASKS), "tasks": "hello-world"}, "valid list"),
    ({"path": str(TASKS / "missing")}, "no such dataset folder"),
])
def test_filter_errors_fail_the_job_before_it_starts(tmp_path, job_name, dataset, message,
                                                     capsys):
    job_file = write_job(tmp_path / "job.yaml", name=job_name, jobs_dir=str(tmp_path / "jobs"),
                         agents=[{"name": "oracle"}], datasets=[dataset])
    assert run_job_file(job_file) == 2
    err = capsys.readouterr().err.replace("\n", " ")
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "jobs").exists() and not job_containers(job_name)


def test_filter_duplicates_dropped_and_order_kept(tmp_path, job_name):
    job_file = write_job(tmp_path / "job.yaml", name=job_name, jobs_dir=str(tmp_path / "jobs"),
                         agents=[{"name": "nop"}],
                         datasets=[{"path": str(TASKS), "tasks": ["hello-world-legacy",
                                                                  "hello-world",
                                                                  "hello-world-legacy"]}])
    assert run_job_file(job_file) == 0
    job = JobResult.model_validate_json((tmp_path / "jobs" / job_name / "result.json").read_text())
    assert [r.task_name for r in job.results] == ["hello-world-legacy", "hello-world"]


def inject_create_failures(monkeypatch, failures: int) -> list[str]:
    """Make a container create (the Docker SDK's or `engine.create`) fail with a 500
    `failures` times.

    Returns the log of create calls: "injected", "created", or "refused" (the daemon's own
    refusal, e.g. of a storage quota the sandbox then retries without).
    """
    calls: list[str] = []
    original = docker.models.containers.ContainerCollection.create

    def create(self, *args, **kwargs):
        if calls.count("injected") < failures:
            calls.append("injected")
            response = requests.Response()
            response.status_code, response.reason = 500, "Internal Server Error"
            raise docker.errors.APIError("injected", response=response,
                                         explanation="injected daemon failure (500)")
        try:
            container = original(self, *args, **kwargs)
        except docker.errors.APIError:
            calls.append("refused")
            raise
        calls.append("created")
        return container

    monkeypatch.setattr(docker.models.containers.ContainerCollection, "create", create)
    from benchflow.sandbox.docker import engine  # the create over the local socket

    create_plain = engine.create

    def engine_create(name, kwargs):
        if calls.count("injected") < failures:
            calls.append("injected")
            raise engine.Refused(500, "injected daemon failure (500)")
        try:
            created = create_plain(name, kwargs)
        except engine.Refused:
            calls.append("refused")
            raise
        if created is not None:  # else the SDK creates (counted above)
            calls.append("created")
        return created

    monkeypatch.setattr(engine, "create", engine_create)
    return calls


def test_an_infrastructure_failure_is_retried_and_succeeds(tmp_path, job_name, monkeypatch):
    calls = inject_create_failures(monkeypatch, 1)
    job_file = write_job(tmp_path / "job.yaml", name=job_name, jobs_dir=str(tmp_path / "jobs"),
                         retry={"max_attempts": 3, "initial_delay_ms": 50},
                         agents=[{"name": "oracle"}],
                         datasets=[{"path": str(TASKS), "tasks": ["hello-world"]}])
    assert run_job_file(job_file) == 0
    (result,) = trial_results(tmp_path / "jobs" / job_name)
    assert result.error is None and result.reward == 1.0
    assert [e.type for e in result.retried_errors] == ["environment_start_failed"]
    assert "500" in result.retried_errors[0].message
    assert (calls.count("injected"), calls.count("created")) == (1, 1)
    root = tmp_path / "jobs" / job_name / "oracle" / "tasks" / "hello-world__1"
    assert (root / "retries" / "1" / "error.txt").exists()


def test_an_agent_failure_is_not_retried(tmp_path, job_name, monkeypatch):
    calls = inject_create_failures(monkeypatch, 0)
    job_file = write_job(tmp_path / "job.yaml", name=job_name, jobs_dir=str(tmp_path / "jobs"),
                         retry={"max_attempts": 3, "initial_delay_ms": 50},
                         agents=[{"name": "failing", "execute": "echo failing; exit 7"}],
                         datasets=[{"path": str(TASKS), "tasks": ["hello-world"]}])
    assert run_job_file(job_file) == 1
    (result,) = trial_results(tmp_path / "jobs" / job_name)
    assert result.error is not None and result.error.type == "agent_execution_failed"
    assert "code 7" in result.error.message
    assert result.retried_errors == [] and result.reward is None
    assert (calls.count("injected"), calls.count("created")) == (0, 1)


def benchflow_cli() -> list[str]:
    """`benchflow jobs` once cli/main.py mounts it; until then the module itself."""
    probe = subprocess.run([str(BENCHFLOW), "jobs", "--help"], capture_output=True, check=False)
    if probe.returncode == 0:
        return [str(BENCHFLOW), "jobs"]
    return [sys.executable, "-m", "benchflow.cli.jobs"]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_sigint_cancels_the_job_and_resume_runs_exactly_the_rest(tmp_path, job_name):
    fast = {"name": "fast", "execute": "echo 'Hello, world!' > /app/hello.txt"}
    slow = {"name": "slow", "env": {"SLEEP": "${BF_TEST_SLEEP}"},
            "execute": "sleep \"$SLEEP\"\necho 'Hello, world!' > /app/hello.txt"}
    job_file = write_job(tmp_path / "job.yaml", name=job_name, jobs_dir=str(tmp_path / "jobs"),
                         n_attempts=2, n_concurrent_trials=3, agents=[fast, slow],
                         datasets=[{"path": str(TASKS),
                                    "tasks": ["hello-world", "hello-world-legacy"]}])
    job_dir = tmp_path / "jobs" / job_name
    cli = benchflow_cli()
    env = {**os.environ, "BF_TEST_SLEEP": "300"}
    proc = subprocess.Popen([*cli, "run", str(job_file)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(list(job_dir.glob("fast/*/*/result.json"))) == 4
                 and len(job_containers(job_name, running=True)) == 3,
                 120, "4 fast trials done and 3 slow ones running")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        reap(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    job = JobResult.model_validate_json((job_dir / "result.json").read_text())
    assert job.cancelled and job.total_trials == 8
    assert (job.skipped_trials, [s.agent_name for s in job.skipped]) == (1, ["slow"])
    slow_results = [r for r in trial_results(job_dir) if r.agent_name == "slow"]
    assert len(slow_results) == 3 and all(r.error.type == "cancelled" for r in slow_results)
    assert job_containers(job_name) == []
    fast_files = {p: p.read_bytes() for p in job_dir.glob("fast/*/*/result.json")}

    resumed = subprocess.run([*cli, "resume", str(job_dir)], capture_output=True, text=True,
                             env={**os.environ, "BF_TEST_SLEEP": "0"}, timeout=300, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert "4 trial(s) already finished; running 4" in resumed.stderr
    assert {p: p.read_bytes() for p in job_dir.glob("fast/*/*/result.json")} == fast_files
    results = trial_results(job_dir)
    assert len(results) == 8 and all(r.reward == 1.0 and r.error is None for r in results)
    job = JobResult.model_validate_json((job_dir / "result.json").read_text())
    assert (job.cancelled, job.total_trials, job.completed_trials, job.skipped_trials) == (
        False, 8, 8, 0)
    assert job_containers(job_name) == []


def test_a_second_sigint_exits_at_once_and_still_removes_containers(tmp_path, job_name):
    job_file = write_job(tmp_path / "job.yaml", name=job_name, jobs_dir=str(tmp_path / "jobs"),
                         n_attempts=3, n_concurrent_trials=2,
                         agents=[{"name": "slow", "execute": "sleep 300"}],
                         datasets=[{"path": str(TASKS), "tasks": ["hello-world"]}])
    proc = subprocess.Popen([*benchflow_cli(), "run", str(job_file)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: len(job_containers(job_name, running=True)) == 2, 120, "2 running trials")
        proc.send_signal(signal.SIGINT)
        assert proc.stderr is not None
        said = ""
        while "cancelling the job" not in said:  # the first signal was handled, so the
            line = proc.stderr.readline()          # second is not merged into it
            assert line, said
            said += line
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        reap(proc)
    assert proc.returncode == 130, err
    # the second signal took the hard exit (results written, sandboxes removed at once)
    assert "sandbox(es); exiting" in err and "Traceback" not in err
    assert job_containers(job_name) == []
    job = JobResult.model_validate_json(
        (tmp_path / "jobs" / job_name / "result.json").read_text())
    assert job.cancelled and job.total_trials == 3
