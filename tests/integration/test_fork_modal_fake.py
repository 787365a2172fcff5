"""Turn snapshots and a fork on the modal backend (its SDK fake: local containers,
`snapshot_filesystem` as a committed image): the same flow as `test_fork.py` on docker."""

from __future__ import annotations

import json

import pytest

import benchflow
from benchflow.config import RolloutConfig
from benchflow.roles import RoleAgent
from benchflow.job.job import run_fork
from benchflow.rollout.fork import plan_fork
from benchflow.rollout.snapshots import read_snapshots, remove_snapshots
from benchflow.sandbox.modal.config import ModalConfig
from benchflow.sandbox.modal.snapshots import SnapshotIndex
from benchflow.task import load_task
from tests.fakes import modal_sdk

from .conftest import TASKS
from .test_fork import state_before
from .test_modal_fake_e2e import _reset_fake  # noqa: F401 - autouse: a fresh fake per test

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

CODER_REVIEWER = TASKS / "coder-reviewer"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def test_snapshot_turns_and_fork_on_modal(tmp_path, job_label):
    task = load_task(CODER_REVIEWER)
    assert task.scenes is not None
    scenes = task.scenes.to_scenes("scripted", str(CODER_REVIEWER / "scripted.yaml"))
    config = RolloutConfig(task_path=CODER_REVIEWER, scenes=scenes, environment="modal",
                           provider_config=modal_sdk.PROVIDER_CONFIG, jobs_dir=tmp_path / "jobs",
                           job_name=job_label, snapshot_turns=True)
    first = await benchflow.run(config)
    assert first.error is None and first.reward == 1.0, first.error
    folder = tmp_path / "jobs" / job_label / first.rollout_name
    record = read_snapshots(folder)
    assert record is not None and record.backend == "modal"
    assert [s.step for s in record.snapshots] == [0, 1, 2, 3]
    index = SnapshotIndex(ModalConfig.model_validate(modal_sdk.PROVIDER_CONFIG))
    assert all(index.get(s.name) for s in record.snapshots)

    other = tmp_path / "other.yaml"
    other.write_text(json.dumps({"roles": {"reviewer": {"turns": [{"actions": [
        {"type": "write_file", "path": "/app/review.md",
         "content": "multiples of 15 must return FizzBuzz\n"}]}]}}}))
    plan = await plan_fork(folder, 1, {"reviewer": RoleAgent("scripted", str(other))},
                           jobs_dir=tmp_path / "forks", job_name="fork")
    (fork,) = await run_fork(plan)
    assert fork.error is None and fork.reward == 1.0, fork.error
    assert fork.parent is not None and fork.parent.turn == 1
    forked = tmp_path / "forks" / "fork" / fork.rollout_name
    start = {p: v["sha256"] for p, v in json.loads(
        (forked / "workspace_start.json").read_text()).items()}
    assert start == state_before(folder, 1)

    removed = await remove_snapshots([folder])
    assert sorted(removed) == sorted(s.name for s in record.snapshots)
    assert not any(index.get(s.name) for s in record.snapshots)
