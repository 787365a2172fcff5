"""`benchflow run`'s first sandbox starts early (`benchflow.sandbox.early`), on Docker: it
carries its job's labels from its creation, so a process killed once it started leaves a
container `benchflow sandbox cleanup --job` finds, and a command failing after it started
(an import error, Ctrl-C) removes it before it exits."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from benchflow.cli.main import app

from .conftest import TASKS, job_containers

pytestmark = [pytest.mark.docker]

RUN = """
import os, signal, sys
import benchflow.sandbox.early as early
how = sys.argv[1]
def start_early(*args, _start=early.start_early, **kwargs):
    started = _start(*args, **kwargs)
    assert started is not None
    started.wait()  # the container has started
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise ImportError("a module the rest of the command needs is broken")
early.start_early = start_early
sys.argv = ["benchflow", "run", sys.argv[2], "-a", "oracle", "--jobs-dir", sys.argv[3],
            "--job-name", sys.argv[4]]
from benchflow.cli.main import main
main()
"""


def run(how: str, tmp_path, job: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUN, how, str(TASKS / "hello-world"),
                           str(tmp_path / "jobs"), job],
                          capture_output=True, text=True, timeout=240, check=False)


def test_a_process_killed_after_the_early_start_leaves_what_cleanup_finds(tmp_path, job_name):
    done = run("kill", tmp_path, job_name)
    assert done.returncode == -9, done.stdout + done.stderr
    left = job_containers(job_name)
    assert len(left) == 1  # labelled with its job (and rollout) from its creation
    assert left[0].labels["benchflow.rollout"].endswith("hello-world__1")
    cleanup = CliRunner().invoke(app, ["sandbox", "cleanup", "--job", job_name, "--jobs-dir",
                                       str(tmp_path / "jobs")])
    assert cleanup.exit_code == 0, cleanup.output
    assert job_containers(job_name) == []


def test_a_command_failing_after_the_early_start_removes_that_sandbox(tmp_path, job_name):
    done = run("fail", tmp_path, job_name)
    assert done.returncode != 0 and "is broken" in done.stderr, done.stdout + done.stderr
    assert job_containers(job_name) == []
