"""Verifier strategies end to end on real containers: the script strategy's `command`
(native `cd /verifier && <command>`, legacy `[verifier] command`), and the workspace lock."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchflow import RolloutConfig, Scene
from benchflow.rollout import Rollout

from .conftest import TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

COMMAND = ('pwd > /logs/verifier/cwd.txt && stat -c %U /app/hello.txt > /logs/verifier/owner.txt'
           ' && ls > /logs/verifier/listing.txt && echo 0.75 > /logs/verifier/reward.txt')


def native_task(tmp_path: Path, frontmatter: str, test_sh: bool = False) -> Path:
    task = tmp_path / "native-command"
    shutil.copytree(TASKS / "hello-world", task)
    if not test_sh:
        (task / "verifier" / "test.sh").unlink()
    (task / "verifier" / "verifier.md").write_text(f"---\n{frontmatter}---\nNotes.\n")
    (task / "verifier" / "data.txt").write_text("seen from the verifier folder\n")
    return task


async def run_oracle(task: Path, tmp_path: Path, job: str, agent: str = "oracle",
                     **kw: object):
    config = RolloutConfig(task_path=task, scenes=[Scene.single(agent=agent)],
                           jobs_dir=tmp_path / "jobs", job_name=job, harden=True, **kw)
    rollout = Rollout(config)
    return rollout, await rollout.run()


async def test_a_native_command_runs_from_the_verifier_folder(tmp_path: Path, job_label: str):
    import json

    task = native_task(tmp_path, f"strategy: script\ncommand: {json.dumps(COMMAND)}\n")
    rollout, result = await run_oracle(task, tmp_path, job_label)

    assert result.error is None, result.error
    assert result.reward == 0.75
    logs = rollout.paths.logs_dir / "verifier"
    assert (logs / "cwd.txt").read_text().strip() == "/verifier"
    assert "data.txt" in (logs / "listing.txt").read_text()
    # the workspace was locked to root before the verifier ran
    assert (logs / "owner.txt").read_text().strip() == "root"


async def test_the_default_command_is_the_folders_test_sh(tmp_path: Path, job_label: str):
    task = native_task(tmp_path, "strategy: script\n", test_sh=True)
    _, result = await run_oracle(task, tmp_path, job_label)
    assert result.error is None, result.error
    assert result.reward == 1.0


async def test_a_failing_command_is_a_verifier_error_naming_it(tmp_path: Path, job_label: str):
    task = native_task(tmp_path, "command: \"exit 3\"\n")
    _, result = await run_oracle(task, tmp_path, job_label)
    assert result.error is not None and result.error.type == "verifier_failed"
    assert "exit 3" in result.error.message and result.reward is None


async def test_a_legacy_command(tmp_path: Path, job_label: str):
    task = tmp_path / "legacy-command"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (task / "instruction.md").write_text("Nothing to do.\n")
    (task / "tests").mkdir()
    (task / "tests" / "score.sh").write_text("#!/bin/sh\npwd > /logs/verifier/cwd.txt\n"
                                             "echo 1 > /logs/verifier/reward.txt\n")
    (task / "task.toml").write_text('version = "1.0"\n[verifier]\ncommand = "sh score.sh"\n')
    rollout, result = await run_oracle(task, tmp_path, job_label, agent="nop")
    assert result.error is None, result.error
    assert result.reward == 1.0
    assert (rollout.paths.logs_dir / "verifier" / "cwd.txt").read_text().strip() == "/tests"
