"""A task whose server starts late: the healthcheck holds the agent until it answers."""

from __future__ import annotations

import pytest

from benchflow import Scene

from .conftest import FIXTURES
from .test_scenes import run_rollout

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

TASK = FIXTURES / "tasks" / "healthcheck"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def test_the_oracle_runs_once_the_server_answers(tmp_path, job_label):
    result, paths = await run_rollout(TASK, [Scene.single(agent="oracle")], tmp_path / "jobs",
                                      job_label)
    assert result.error is None, result.error
    assert result.reward == 1.0
    assert "the sandbox is healthy after" in paths.log.read_text()
