"""A whole `benchflow run tasks/hello-world -a oracle` process on Docker: it imports nothing
a task run does not need (the list in tests/unit/test_cli_imports.py), and ending the
process without the interpreter's teardown loses no output, file or exit handler."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.unit.test_cli_imports import NEVER_FOR_ONE_ROLLOUT, forbidden

from .conftest import TASKS

pytestmark = [pytest.mark.docker]

RUN = """
import atexit, sys
from pathlib import Path
out = Path(sys.argv[1])
atexit.register(lambda: out.write_text(" ".join(sorted(sys.modules))))  # exit handlers run
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
    loaded = set(modules.read_text().split())
    assert "benchflow.rollout.rollout" in loaded and "docker" in loaded
    assert forbidden(loaded) == []
    assert forbidden(loaded, NEVER_FOR_ONE_ROLLOUT) == []
    job = tmp_path / "jobs" / job_label
    assert json.loads((job / "result.json").read_text())["completed_trials"] == 1
    trial = next(job.glob("oracle/*/hello-world__1"))
    assert json.loads((trial / "result.json").read_text())["reward"] == 1.0
    assert "rollout ends" in (trial / "rollout.log").read_text()
