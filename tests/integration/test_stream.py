"""`benchflow.stream` with real containers: results as they finish, and a consumer that
stops early leaves no container behind."""

from __future__ import annotations

import pytest

import benchflow as bf
from benchflow.job.config import parse_job_config

from .conftest import TASKS, job_containers

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def _config(tmp_path, name: str, tasks: list[str], attempts: int = 1):
    return parse_job_config({
        "name": name, "jobs_dir": str(tmp_path / "jobs"), "n_attempts": attempts,
        "agents": [{"name": "oracle"}],
        "datasets": [{"path": str(TASKS), "tasks": tasks}]})


async def test_stream_yields_real_rollouts(tmp_path, job_label):
    name = f"{job_label}-stream"
    async with bf.stream(_config(tmp_path, name, ["hello-world"], attempts=3),
                         concurrency=2) as results:
        rewards = [r.reward async for r in results]
    assert rewards == [1.0, 1.0, 1.0]
    assert results.result is not None and results.result.completed_trials == 3
    assert not job_containers(name)


async def test_breaking_out_removes_the_running_sandboxes(tmp_path, job_label):
    name = f"{job_label}-stream-break"
    async with bf.stream(_config(tmp_path, name, ["hello-world"], attempts=4),
                         concurrency=2) as results:
        async for first in results:
            break
    assert first.reward == 1.0
    assert results.result is not None and results.result.cancelled
    assert not job_containers(name)


def test_the_scale_docs_example_runs(tmp_path, job_label):
    import re
    import subprocess
    import sys

    import yaml

    doc = (TASKS.parent / "docs" / "how-to" / "scale.md").read_text()
    (snippet,) = re.findall(r"```python\n(.*?)```", doc, re.S)
    name = f"{job_label}-stream-doc"
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({
        "name": name, "jobs_dir": str(tmp_path / "jobs"), "n_attempts": 4,
        "agents": [{"name": "oracle"}],
        "datasets": [{"path": str(TASKS), "tasks": ["hello-world"]}]}))
    (tmp_path / "example.py").write_text(snippet)
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1.0, 1.0]"
    assert not job_containers(name)
    result = (tmp_path / "jobs" / name / "result.json").read_text()
    assert '"cancelled": true' in result  # two of four were still running or queued
