"""Whole rollouts on the daytona backend, against the SDK fake whose sandboxes are local
containers: the oracle scores 1.0, nop 0.0, failures are typed, nothing is left behind."""

from __future__ import annotations

from pathlib import Path

import daytona
import docker
import pytest

import benchflow
from benchflow.config import RolloutConfig, Scene
from benchflow.sandbox.registry import get_provider
from tests.fakes import daytona_sdk

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

REPO = Path(__file__).resolve().parents[2]
FAKE = {"client_factory": "tests.fakes.daytona_sdk:FakeAsyncDaytona"}


@pytest.fixture(autouse=True)
def _reset_fake():
    daytona_sdk.reset()
    yield
    daytona_sdk.reset()


def _config(tmp_path: Path, job_label: str, agent: str, task: str = "hello-world") -> RolloutConfig:
    return RolloutConfig(task_path=REPO / "tasks" / task, scenes=[Scene.single(agent=agent)],
                         environment="daytona", provider_config=FAKE, jobs_dir=tmp_path / "jobs",
                         job_name=job_label)


def _containers(job_label: str) -> list:
    return docker.from_env().containers.list(
        all=True, filters={"label": [daytona_sdk.FAKE_LABEL, f"benchflow.job={job_label}"]})


@pytest.mark.parametrize(("task", "agent", "reward"), [
    ("hello-world", "oracle", 1.0), ("hello-world", "nop", 0.0),
    ("hello-world-legacy", "oracle", 1.0),
])
async def test_oracle_and_nop_score_on_daytona(tmp_path, job_label, task, agent, reward):
    result = await benchflow.run(_config(tmp_path, job_label, agent, task))
    assert result.error is None, result.error
    assert result.reward == reward
    assert "create" in daytona_sdk.FakeAsyncDaytona.calls
    assert "delete" in daytona_sdk.FakeAsyncDaytona.calls
    assert _containers(job_label) == []


async def test_second_rollout_reuses_the_snapshot(tmp_path, job_label):
    await benchflow.run(_config(tmp_path, job_label, "oracle"))
    daytona_sdk.reset()
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.reward == 1.0
    assert "snapshot.get" in daytona_sdk.FakeAsyncDaytona.calls
    assert "snapshot.create" not in daytona_sdk.FakeAsyncDaytona.calls


async def test_create_500_is_a_retryable_start_error(tmp_path, job_label):
    daytona_sdk.FakeAsyncDaytona.inject["create"] = [
        daytona.DaytonaInternalServerError("500 boom", status_code=500)]
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.error is not None and result.error.type == "environment_start_failed"
    assert _containers(job_label) == []


async def test_bad_credentials_are_not_retryable(tmp_path, job_label):
    daytona_sdk.FakeAsyncDaytona.inject["create"] = [
        daytona.DaytonaAuthenticationError("401 invalid API key", status_code=401)]
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.error is not None and result.error.type != "environment_start_failed"
    assert "daytona rejected the request" in result.error.message


async def test_acp_agent_needs_live_processes_and_fails_before_start(tmp_path, job_label):
    config = RolloutConfig(task_path=REPO / "tasks" / "hello-world",
                           scenes=[Scene.single(agent="scripted")], environment="daytona",
                           provider_config=FAKE, jobs_dir=tmp_path / "jobs", job_name=job_label)
    result = await benchflow.run(config)
    assert result.error is not None
    assert "daytona sandbox backend cannot provide live processes" in result.error.message
    assert "create" not in daytona_sdk.FakeAsyncDaytona.calls


async def test_cleanup_removes_a_jobs_leftovers(tmp_path, job_label):
    client = daytona_sdk.FakeAsyncDaytona()
    await client.create(daytona.CreateSandboxFromImageParams(
        image="debian:bookworm-slim", labels={"benchflow.managed": "true",
                                              "benchflow.job": job_label}))
    assert len(_containers(job_label)) == 1
    removed = await get_provider("daytona", FAKE).cleanup(job_label)
    assert len(removed) == 1 and _containers(job_label) == []
