"""A whole `benchflow run tasks/hello-world -a oracle` process on Docker: it imports nothing
a task run does not need (the list in tests/unit/test_cli_imports.py), and ending the
process without the interpreter's teardown loses no output, file or exit handler."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.unit.test_cli_imports import NEVER_FOR_ONE_ROLLOUT, WHILE_THE_SANDBOX_STARTS, forbidden

from .conftest import TASKS

pytestmark = [pytest.mark.docker]

RUN = """
import atexit, json, sys
from pathlib import Path
import benchflow.sandbox.early as early
out = Path(sys.argv[1])
seen = {}
def start_early(*args, _start=early.start_early, **kwargs):  # what is loaded when it starts
    seen["at_start"] = sorted(sys.modules)
    started = _start(*args, **kwargs)
    seen["started"] = started is not None
    return started
def claim_early(*args, _claim=early.claim_early, **kwargs):  # by the first rollout
    claimed = _claim(*args, **kwargs)
    seen["claimed"] = claimed is not None
    return claimed
early.start_early, early.claim_early = start_early, claim_early  # before they are imported
atexit.register(lambda: out.write_text(json.dumps({**seen, "modules": sorted(sys.modules)})))
sys.argv = ["benchflow", "run", sys.argv[2], "-a", "oracle", "--jobs-dir", sys.argv[3],
            "--job-name", sys.argv[4]]
from benchflow.cli.main import main
main()
"""


def test_an_oracle_run_imports_only_what_it_needs(tmp_path, job_label):
    modules = tmp_path / "modules.txt"
    done = subprocess.run([sys.executable, "-c", RUN, str(modules), str(TASKS / "hello-world"),
                           str(tmp_path / "jobs"), job_label],
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "oracle" in done.stdout and "1.000" in done.stdout  # the summary table, flushed
    assert "pass rate 100%" in done.stderr
    seen = json.loads(modules.read_text())
    loaded = set(seen["modules"])
    # the first sandbox started before the rollout machinery (and rich) was imported, and
    # the rollout adopted it
    assert seen["started"] and seen["claimed"]
    assert forbidden(set(seen["at_start"]), WHILE_THE_SANDBOX_STARTS) == []
    assert "benchflow.rollout.rollout" in loaded and "benchflow.sandbox.docker.engine" in loaded
    assert forbidden(loaded) == []
    assert forbidden(loaded, NEVER_FOR_ONE_ROLLOUT) == []
    job = tmp_path / "jobs" / job_label
    assert json.loads((job / "result.json").read_text())["completed_trials"] == 1
    trial = next(job.glob("oracle/*/hello-world__1"))
    assert json.loads((trial / "result.json").read_text())["reward"] == 1.0
    assert "rollout ends" in (trial / "rollout.log").read_text()
