"""Oracle and nop rollouts on real containers, and one fixture task per error type."""

from __future__ import annotations

import json
from pathlib import Path

import docker
import pytest

from benchflow import RolloutConfig, Scene
from benchflow.rollout import Rollout, RolloutResult
from benchflow.task import load_task

from .conftest import FIXTURES, TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

EXAMPLE_TASKS = sorted(p.name for p in TASKS.iterdir()
                       if ((p / "task.md").exists() or (p / "task.toml").exists())
                       and not (p / "verifier" / "verifier.md").exists())
"""Every example task but those an LLM judge scores (tests/integration/test_llm_judge.py)."""


async def run_rollout(task: Path, agent: str, jobs_dir: Path, job: str, **kw) -> RolloutResult:
    config = RolloutConfig(task_path=task, scenes=[Scene.single(agent=agent)], jobs_dir=jobs_dir,
                           job_name=job, **kw)
    return await Rollout(config).run()


@pytest.mark.parametrize("task", EXAMPLE_TASKS)
async def test_oracle_scores_one_on_every_example_task(task, tmp_path, job_label):
    result = await run_rollout(TASKS / task, "oracle", tmp_path, job_label)
    assert result.error is None, result.error
    assert result.reward == 1.0
    assert result.rewards["reward"] == 1.0
    root = tmp_path / job_label / "oracle" / "tasks" / f"{task}__1"
    on_disk = RolloutResult.model_validate_json((root / "result.json").read_text())
    assert on_disk == result
    verifier_logs = root / "logs" / "verifier"
    assert {"reward.txt", "reward.json"} & {p.name for p in verifier_logs.iterdir()}
    assert (root / "logs" / "agent" / "oracle.txt").exists()
    assert (root / "command" / "stdout.txt").exists()
    assert json.loads((root / "config.json").read_text())["task_path"].endswith(task)
    durations = result.durations
    assert durations.total_sec is not None and durations.verifier_sec is not None
    assert result.timestamps.started_at <= result.timestamps.verifier_started_at


@pytest.mark.parametrize("task", EXAMPLE_TASKS)
async def test_nop_scores_zero(task, tmp_path, job_label):
    result = await run_rollout(TASKS / task, "nop", tmp_path, job_label)
    assert result.error is None
    assert result.reward == 0.0


ERROR_FIXTURES = {
    "build-fails": "environment_build_failed",
    "build-timeout": "environment_build_timeout",
    "pull-fails": "environment_image_pull_failed",
    "start-fails": "environment_start_failed",
    "resources-fail": "environment_resource_allocation_failed",
    "solve-fails": "agent_execution_failed",
    "solve-timeout": "agent_execution_timeout",
    "verifier-fails": "verifier_failed",
    "verifier-timeout": "verifier_timeout",
    "reward-missing": "verifier_reward_missing",
    "reward-invalid": "verifier_reward_invalid",
    "missing-test": "task_invalid",
}


@pytest.mark.parametrize(("fixture", "error_type"), sorted(ERROR_FIXTURES.items()))
async def test_each_broken_fixture_gives_its_error_type(fixture, error_type, tmp_path, job_label):
    result = await run_rollout(FIXTURES / "tasks" / fixture, "oracle", tmp_path, job_label,
                               force_build=fixture.startswith("build"))
    assert result.error is not None, f"{fixture}: expected {error_type}, got reward {result.reward}"
    assert result.error.type == error_type, result.error.message
    assert result.reward is None
    root = tmp_path / job_label / "oracle" / "tasks" / f"{fixture}__1"
    assert RolloutResult.model_validate_json((root / "result.json").read_text()).error == result.error
    assert (root / "error.txt").exists()


@pytest.mark.parametrize("fixture", ["verifier-fails", "verifier-timeout", "reward-missing",
                                     "reward-invalid"])
async def test_hardened_verifier_errors_keep_their_type(fixture, tmp_path, job_label):
    # hardened: harden.sh, the verifier folder, the seal and test.sh in one exec
    result = await run_rollout(FIXTURES / "tasks" / fixture, "oracle", tmp_path, job_label,
                               harden=True)
    assert result.error is not None and result.error.type == ERROR_FIXTURES[fixture], result.error
    root = tmp_path / job_label / "oracle" / "tasks" / f"{fixture}__1"
    assert json.loads((root / "verifier" / "hardening.json").read_text())["killed"] >= 0


async def test_agent_failure_skips_the_verifier(tmp_path, job_label):
    result = await run_rollout(FIXTURES / "tasks" / "solve-fails", "oracle", tmp_path, job_label)
    assert result.error.type == "agent_execution_failed"
    assert "failing on purpose" in result.error.message
    assert result.timestamps.verifier_started_at is None


async def test_build_failure_saves_the_build_log(tmp_path, job_label):
    result = await run_rollout(FIXTURES / "tasks" / "build-fails", "oracle", tmp_path, job_label,
                               force_build=True)
    assert result.error.type == "environment_build_failed"
    log = (tmp_path / job_label / "oracle" / "tasks" / "build-fails__1" / "build.log").read_text()
    assert "about to fail" in log


async def test_task_not_found_starts_no_container(tmp_path, job_label):
    job = f"{job_label}-not-found"  # its own job: other tests and sessions share the daemon
    result = await run_rollout(tmp_path / "no-such-task", "oracle", tmp_path, job)
    assert result.error.type == "task_not_found"
    assert docker.from_env().containers.list(all=True,
                                             filters={"label": f"benchflow.job={job}"}) == []


async def test_second_run_reuses_the_image(tmp_path, job_label):
    client = docker.from_env()  # only this task's images: other sessions build beside us
    await run_rollout(TASKS / "hello-world", "oracle", tmp_path, job_label)
    images_before = {i.id for i in client.images.list(name="benchflow/hello-world")}
    second = await run_rollout(TASKS / "hello-world", "oracle", tmp_path, job_label, attempt=2)
    assert second.reward == 1.0
    assert {i.id for i in client.images.list(name="benchflow/hello-world")} == images_before
    assert not (tmp_path / job_label / "oracle" / "tasks" / "hello-world__2" / "build.log").exists()


async def test_task_workdir_is_honoured(tmp_path, job_label):
    result = await run_rollout(FIXTURES / "tasks" / "custom-workdir", "oracle", tmp_path, job_label)
    assert (result.error, result.reward) == (None, 1.0)


async def test_image_with_its_own_non_root_user(tmp_path, job_label):
    assert load_task(FIXTURES / "tasks" / "own-user").config.agent.user is None
    result = await run_rollout(FIXTURES / "tasks" / "own-user", "oracle", tmp_path, job_label)
    assert (result.error, result.reward) == (None, 1.0)


async def test_preserve_on_failure_keeps_the_failed_container(tmp_path, job_label):
    result = await run_rollout(TASKS / "hello-world", "nop", tmp_path, job_label,
                               preserve_env="on_failure")
    assert result.sandbox_preserved
    container = docker.from_env().containers.get(result.sandbox_preserved)
    assert container.labels["benchflow.job"] == job_label
    container.remove(force=True)
