"""The reliability suite: faults and hostile inputs, on a Docker daemon of its own.

Every test here that needs Docker runs against `second_daemon` (started and stopped by
the session, its own data root and socket), never the shared daemon: cleanup scope and
daemon faults are tried where no other job can be harmed. Run with
`make test-reliability` (these tests are marked slow).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .daemon import SecondDaemon

docker = pytest.importorskip("docker")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def second_daemon() -> Iterator[SecondDaemon]:
    if os.geteuid() != 0 or shutil.which("dockerd") is None or shutil.which("ip") is None:
        pytest.skip("needs root, dockerd and ip (iproute2) to start a second Docker daemon")
    try:
        shared = docker.from_env()
        try:
            shared.ping()
        finally:
            shared.close()
    except Exception:  # noqa: BLE001 - the base image comes from the shared daemon
        pytest.skip("no Docker daemon answers to copy the base image from")
    daemon = SecondDaemon()
    try:
        daemon.start()
        daemon.load_base_image()
        yield daemon
    finally:
        daemon.destroy()


def make_task(root: Path, name: str = "sleepy", timeout_sec: int = 3600) -> Path:
    """A task whose agent budget is long (the tests' agents decide how long they run)."""
    task = root / name
    (task / "environment").mkdir(parents=True)
    (task / "verifier").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "verifier" / "test.sh").write_text(
        "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (task / "task.md").write_text(
        f"---\nagent:\n  timeout_sec: {timeout_sec}\nverifier:\n  timeout_sec: 60\n---\n"
        "Do nothing.\n")
    return task


def job_file(path: Path, *, name: str, jobs_dir: Path, tasks: Path, execute: str,
             extra: str = "") -> Path:
    """A job file of one command agent (`execute`) on the tasks folder."""
    path.write_text(
        f"name: {name}\njobs_dir: {jobs_dir}\nn_concurrent_trials: 2\n"
        "retry: {max_attempts: 0}\n"
        "agents:\n  - name: sh\n    execute: " + repr(execute) + "\n"
        "    env: {BF_SLEEP: '${BF_SLEEP}'}\n"
        f"datasets:\n  - path: {tasks}\n{extra}")
    return path


def benchflow_env(daemon: SecondDaemon, **extra: str) -> dict[str, str]:
    return {**daemon.env, "BENCHFLOW_EXTRA_CA_CERTS": "none", "COLUMNS": "200",
            "NO_COLOR": "1", **extra}


def _cli(daemon: SecondDaemon, args: list[str]) -> list[str]:
    """The benchflow CLI in the daemon's network namespace, beside its sandboxes."""
    return [*daemon.enter, sys.executable, "-c", "from benchflow.cli.main import main; main()",
            *args]


def benchflow(daemon: SecondDaemon, args: list[str], env: dict[str, str], *,
              timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the benchflow CLI in a subprocess to the end."""
    return subprocess.run(_cli(daemon, args), capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def benchflow_bg(daemon: SecondDaemon, args: list[str], env: dict[str, str],
                 log: Path) -> subprocess.Popen[bytes]:
    """Start the benchflow CLI in the background (its output in `log`)."""
    with log.open("ab") as out:
        return subprocess.Popen(_cli(daemon, args), stdout=out, stderr=subprocess.STDOUT,
                                env=env)


def wait_for(predicate, what: str, proc: subprocess.Popen[bytes] | None = None,
             limit_sec: float = 600) -> None:
    """Wait until `predicate()` holds (an event in another process), failing if `proc`
    exits first or the event never comes."""
    deadline = time.monotonic() + limit_sec
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"process exited ({proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


def running_containers(daemon: SecondDaemon, labels: dict[str, str] | None = None) -> list:
    """The running containers carrying `labels` (default: every benchflow container)."""
    filters = {"label": [f"{k}={v}" for k, v in (labels or {}).items()]
               or ["benchflow.managed=true"]}
    return [c for c in daemon.client().containers.list(filters=filters)
            if c.status == "running"]
