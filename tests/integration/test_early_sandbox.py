"""`benchflow run`'s first sandbox starts early (`benchflow.sandbox.early`), on Docker: it
carries its job's labels from its creation, so a process killed once it started leaves a
container `benchflow sandbox cleanup --job` finds, and a command failing after it started
(an import error, Ctrl-C) removes it before it exits."""

from __future__ import annotations

import json
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


TRACED = """
import atexit, json, sys
from pathlib import Path
from benchflow.sandbox.docker import engine, sandbox as docker_sandbox
out = Path(sys.argv[1])
seen = {"created": [], "execs": set()}
def create(name, kwargs, _create=engine.create):  # the create over the daemon's socket
    seen["sdk_at_create"] = "docker" in sys.modules
    created = _create(name, kwargs)
    seen["created"].append(created)
    return created
engine.create = create
exec_into = docker_sandbox.DockerSandbox.exec_into
async def traced(self, *args, **kwargs):  # every command of the run: oracle, verifier
    seen["execs"].add(self.container_id)
    return await exec_into(self, *args, **kwargs)
docker_sandbox.DockerSandbox.exec_into = traced
atexit.register(lambda: out.write_text(json.dumps({**seen, "execs": sorted(seen["execs"])})))
sys.argv = ["benchflow", "run", sys.argv[2], "-a", "oracle", "--jobs-dir", sys.argv[3],
            "--job-name", sys.argv[4]]
from benchflow.cli.main import main
main()
"""


def test_the_container_started_without_the_sdk_is_the_one_the_rollout_uses(tmp_path, job_name):
    seen_file = tmp_path / "seen.json"
    done = subprocess.run([sys.executable, "-c", TRACED, str(seen_file),
                           str(TASKS / "hello-world"), str(tmp_path / "jobs"), job_name],
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0 and "pass rate 100%" in done.stderr, done.stdout + done.stderr
    seen = json.loads(seen_file.read_text())
    (created,) = seen["created"]  # one container, made over the socket (not by the SDK)
    assert created is not None and seen["sdk_at_create"] is False
    assert seen["execs"] == [created]  # the oracle and the verifier ran in it
    assert job_containers(job_name) == []  # and it is gone
