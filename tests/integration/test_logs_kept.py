"""Nothing lost: /logs and the verifier's output are kept whatever the verifier's outcome.

Each rollout here starts a sandbox and ends in a verifier error (or is cancelled while
the verifier runs); the container's /logs must still be in `<trial>/logs/`, and test.sh's
stdout/stderr in `<trial>/logs/verifier/` whenever test.sh ran.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from benchflow import RolloutConfig, Scene
from benchflow.errors import SandboxTeardownError
from benchflow.rollout import Rollout
from benchflow.rollout.events import RolloutEvent, RolloutEventKind

from .conftest import FIXTURES

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


def _rollout(fixture: str, tmp_path: Path, job: str, **kw) -> Rollout:
    config = RolloutConfig(task_path=FIXTURES / "tasks" / fixture,
                           scenes=[Scene.single(agent="oracle")], jobs_dir=tmp_path,
                           job_name=job, **kw)
    return Rollout(config)


@pytest.mark.parametrize(("fixture", "error_type", "stdout"), [
    ("verifier-fails", "verifier_failed", ""),
    ("verifier-timeout", "verifier_timeout", ""),
    ("reward-missing", "verifier_reward_missing", "no reward written"),
    ("reward-invalid", "verifier_reward_invalid", ""),
])
async def test_verifier_failure_keeps_logs_and_output(fixture, error_type, stdout, tmp_path,
                                                      job_label):
    rollout = _rollout(fixture, tmp_path, job_label)
    result = await rollout.run()
    assert result.error is not None and result.error.type == error_type
    logs = rollout.paths.logs_dir
    assert (logs / "agent" / "oracle.txt").is_file()  # /logs was downloaded
    assert (logs / "verifier" / "stdout.txt").is_file()
    assert (logs / "verifier" / "stderr.txt").is_file()
    assert stdout in (logs / "verifier" / "stdout.txt").read_text()
    assert not (rollout.paths.root / "verifier" / "stdout.txt").exists()  # one copy only
    if fixture == "verifier-fails":  # test.sh's own files in /logs/verifier come along too
        assert (logs / "verifier" / "reward.txt").read_text().strip() == "1"
    assert rollout.paths.error.is_file()


async def test_tampered_verify_keeps_logs(tmp_path, job_label):
    rollout = _rollout("verifier-tampered", tmp_path, job_label, harden=True)
    result = await rollout.run()
    assert result.error is not None and result.error.type == "verifier_tampered"
    oracle_log = rollout.paths.logs_dir / "agent" / "oracle.txt"
    assert "tampering with the baseline" in oracle_log.read_text()


async def test_cancelled_verify_keeps_logs(tmp_path, job_label):
    scope = anyio.CancelScope()

    def on_event(event: RolloutEvent) -> None:
        if event.kind is RolloutEventKind.VERIFY_START:
            scope.cancel()

    config = RolloutConfig(task_path=FIXTURES / "tasks" / "verifier-slow",
                           scenes=[Scene.single(agent="oracle")], jobs_dir=tmp_path,
                           job_name=job_label)
    rollout = Rollout(config, listener=on_event)
    with scope:
        await rollout.run()
    assert rollout.result.error is not None and rollout.result.error.type == "cancelled"
    assert (rollout.paths.logs_dir / "agent" / "oracle.txt").read_text().strip() == "solved"
    assert rollout.paths.result.is_file()


class _FailingStop:
    """Wraps a real sandbox; its stop() fails as a daemon error would."""

    def __init__(self, sandbox) -> None:
        self._sandbox = sandbox

    def __getattr__(self, name):
        return getattr(self._sandbox, name)

    async def stop(self, delete: bool = True) -> None:
        await self._sandbox.stop(delete=True)
        raise SandboxTeardownError("docker API error: removal failed on purpose")


async def test_teardown_failure_writes_error_txt(tmp_path, job_label):
    rollout = _rollout("verifier-fails", tmp_path, job_label)
    setup = rollout.setup

    async def setup_then_wrap() -> None:
        await setup()
        rollout.sandbox = _FailingStop(rollout.sandbox)

    rollout.setup = setup_then_wrap  # type: ignore[method-assign]
    result = await rollout.run()
    assert result.teardown_error is not None
    assert result.teardown_error.type == "environment_teardown_failed"
    text = rollout.paths.error.read_text()
    assert "VerifierFailed" in text and "removal failed on purpose" in text


async def test_oracle_without_a_solution_fails_before_any_container(tmp_path, job_label):
    import docker

    task = tmp_path / "no-solution"
    (task / "environment").mkdir(parents=True)
    (task / "verifier").mkdir()
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (task / "verifier" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (task / "task.md").write_text("---\ntask:\n  name: no-solution\n---\nDo nothing.\n")
    config = RolloutConfig(task_path=task, scenes=[Scene.single(agent="oracle")],
                           jobs_dir=tmp_path / "jobs", job_name=job_label)
    result = await Rollout(config).run()
    assert result.error is not None and result.error.type == "task_invalid"
    assert "oracle/solve.sh" in result.error.message
    assert result.timestamps.agent_setup_started_at is None
    labelled = docker.from_env().containers.list(
        all=True, filters={"label": f"benchflow.rollout={result.rollout_name}"})
    assert labelled == []
