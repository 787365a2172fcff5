"""Daemon faults on the suite's own Docker daemon: a restart in the middle of a job.

Restarted under running agents, the daemon stops their containers: those trials end
with a retryable infrastructure error (never as the agent's fault), their containers go
as soon as the daemon answers again (or with the next `jobs resume`), and a plain
`jobs resume` runs them again. A build cut by a restart is retryable too.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import pytest

from benchflow.sandbox.owner import LABEL_JOB_ID, read_job_id

from .conftest import (
    benchflow,
    benchflow_bg,
    benchflow_env,
    job_file,
    make_task,
    running_containers,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.docker]


def _results(job_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(job_dir.glob("*/*/*/result.json"))]


def test_a_daemon_restart_mid_job_is_retryable_and_leaves_nothing(second_daemon, tmp_path):
    tasks = tmp_path / "tasks"
    make_task(tasks, "one")
    make_task(tasks, "two")
    spec = job_file(tmp_path / "job.yaml", name="restart", jobs_dir=tmp_path / "jobs",
                    tasks=tasks, execute="sleep ${BF_SLEEP:-0}")
    job_dir = tmp_path / "jobs" / "restart"
    proc = benchflow_bg(second_daemon, ["jobs", "run", str(spec)],
                        benchflow_env(second_daemon, BF_SLEEP="600"), tmp_path / "run.log")
    try:
        wait_for(lambda: read_job_id(job_dir) is not None and len(running_containers(
            second_daemon, {LABEL_JOB_ID: read_job_id(job_dir) or "-"})) == 2,
            "both sandboxes running", proc)
        second_daemon.restart()
        assert proc.wait(timeout=600) == 1, (tmp_path / "run.log").read_text()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    first = _results(job_dir)
    assert len(first) == 2
    for result in first:  # the infrastructure's fault, not the agent's (no exit 137)
        assert result["error"]["retryable"] is True, result["error"]
        assert result["error"]["type"] == "environment_exec_failed", result["error"]

    resumed = benchflow(second_daemon, ["jobs", "resume", str(job_dir)],
                        benchflow_env(second_daemon, BF_SLEEP="0"))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "2 trial(s) already finished" not in resumed.stderr
    assert [r["error"] for r in _results(job_dir)] == [None, None]
    assert not second_daemon.client().containers.list(all=True)


def test_a_build_cut_by_a_restart_is_retryable(second_daemon, tmp_path):
    tasks = tmp_path / "tasks"
    task = make_task(tasks, "slowbuild")
    (task / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nRUN sleep 20\nWORKDIR /app\n")
    spec = job_file(tmp_path / "job.yaml", name="build", jobs_dir=tmp_path / "jobs",
                    tasks=tasks, execute="true")
    job_dir = tmp_path / "jobs" / "build"
    proc = benchflow_bg(second_daemon, ["jobs", "run", str(spec)],
                        benchflow_env(second_daemon, BF_SLEEP="0"), tmp_path / "run.log")
    try:
        wait_for(lambda: bool(second_daemon.client().containers.list()), "the build's RUN step",
                 proc)
        second_daemon.restart()
        assert proc.wait(timeout=600) == 1, (tmp_path / "run.log").read_text()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    (result,) = _results(job_dir)
    assert result["error"]["type"] == "environment_build_failed", result["error"]
    assert result["error"]["retryable"] is True, result["error"]
    resumed = benchflow(second_daemon, ["jobs", "resume", str(job_dir)],
                        benchflow_env(second_daemon, BF_SLEEP="0"))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [r["error"] for r in _results(job_dir)] == [None]
    left = second_daemon.client().containers.list(all=True)
    assert not left, [(c.name, c.status, c.labels, c.attrs["Config"].get("Cmd")) for c in left]
