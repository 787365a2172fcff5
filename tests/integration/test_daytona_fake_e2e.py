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


def _ledger(tmp_path: Path, job_label: str) -> list:
    from benchflow.sandbox import ledger

    return list(ledger.read(tmp_path / "jobs" / job_label / ledger.LEDGER_NAME))


async def test_ledger_records_before_and_after_create_and_the_delete(tmp_path, job_label):
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.reward == 1.0
    entries = _ledger(tmp_path, job_label)
    assert [e.event for e in entries] == ["creating", "created", "deleted"]
    assert entries[0].sandbox_id is None and entries[1].sandbox_id == entries[2].sandbox_id
    assert {e.rollout for e in entries} == {result.rollout_name}
    assert {e.create_token for e in entries[:2]} == {entries[0].create_token}


async def test_ambiguous_create_deletes_the_duplicate(tmp_path, job_label):
    daytona_sdk.FakeAsyncDaytona.inject["create.after"] = [
        daytona.DaytonaTimeoutError("read timeout after the request went out")]
    result = await benchflow.run(_config(tmp_path, job_label, "oracle"))
    assert result.error is not None and result.error.type == "environment_start_failed"
    events = [e.event for e in _ledger(tmp_path, job_label)]
    assert events == ["creating", "duplicate_deleted"]
    assert _containers(job_label) == []


async def test_rate_limited_creates_back_off_and_succeed(tmp_path, job_label):
    daytona_sdk.FakeAsyncDaytona.inject["create"] = [
        daytona.DaytonaRateLimitError("429", status_code=429) for _ in range(2)]
    config = _config(tmp_path, job_label, "oracle").model_copy(
        update={"provider_config": {**FAKE, "backoff_sec": 0.05}})
    result = await benchflow.run(config)
    assert result.error is None and result.reward == 1.0
    assert daytona_sdk.FakeAsyncDaytona.calls.count("create") == 3


async def test_provider_limiter_bounds_concurrent_sandboxes(tmp_path, job_label):
    import anyio

    from benchflow.sandbox.spec import SandboxSpec

    provider = get_provider("daytona", {**FAKE, "max_sandboxes": 1, "creates_per_sec": 100})
    spec = SandboxSpec(name="limit", docker_image="debian:bookworm-slim",
                       labels={"benchflow.job": job_label})
    first, second = provider.create(spec), provider.create(spec)
    await first.start()
    try:
        with anyio.move_on_after(1.5) as scope:
            await second.start()
        assert scope.cancelled_caught  # waits for a free slot
        await first.stop()
        with anyio.fail_after(30):
            await second.start()
        assert second.sandbox_id is not None
    finally:
        await first.stop()
        await second.stop()


def test_sigint_leaves_no_daytona_sandbox_behind(tmp_path, job_label):
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    from benchflow.job.models import JobResult

    job_file = tmp_path / "job.yaml"
    job_file.write_text(yaml.safe_dump({
        "name": job_label, "jobs_dir": str(tmp_path / "jobs"), "n_attempts": 3,
        "n_concurrent_trials": 2, "agents": [{"name": "slow", "execute": "sleep 300"}],
        "datasets": [{"path": str(REPO / "tasks"), "tasks": ["hello-world"]}],
        "environment": {"type": "daytona", "provider_config": FAKE}}))
    env = {**os.environ, "DAYTONA_API_KEY": "fake-key", "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", "from benchflow.cli.main import main; main()",
                             "jobs", "run", str(job_file)], env=env, cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len([c for c in _containers(job_label) if c.status == "running"]) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read()
            time.sleep(0.3)
        time.sleep(1.0)  # both rollouts into their agent phase
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    job = JobResult.model_validate_json((tmp_path / "jobs" / job_label / "result.json").read_text())
    assert job.cancelled
    assert _containers(job_label) == []
    entries = _ledger(tmp_path, job_label)
    created = {e.sandbox_id for e in entries if e.event == "created"}
    assert len(created) == 2  # both recorded; both gone (the cancel's cleanup deletes by label)
    client = docker.from_env()
    for sandbox_id in created:
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(sandbox_id)


async def test_cleanup_by_ledger_ids_finds_sandboxes_without_the_job_label(tmp_path, job_label):
    from benchflow.sandbox import ledger

    client = daytona_sdk.FakeAsyncDaytona()
    box = await client.create(daytona.CreateSandboxFromImageParams(
        image="debian:bookworm-slim", labels={"benchflow.job": job_label}))  # no managed label
    path = tmp_path / ledger.LEDGER_NAME
    for event, sandbox_id in (("creating", None), ("created", box.id)):
        ledger.record(path, ledger.LedgerEntry(event=event, provider="daytona", rollout="r",
                                               sandbox_id=sandbox_id, create_token="t"))
    assert ledger.unaccounted(path, "daytona") == [box.id]
    assert ledger.unaccounted(path, "modal") == []
    provider = get_provider("daytona", FAKE)
    assert await provider.cleanup(job_label) == []  # not labelled as benchflow's
    assert await provider.cleanup_ids(ledger.unaccounted(path, "daytona")) == [box.id]
    assert _containers(job_label) == []
    assert await provider.cleanup_ids([box.id]) == []  # already gone: not an error
