"""The readiness check: Docker HEALTHCHECK semantics, through a real (host-local) sandbox."""

from __future__ import annotations

import anyio
import pytest

from benchflow.errors import SandboxStartError
from benchflow.task.legacy import parse_task_toml
from benchflow.task.models import HealthcheckSettings
from benchflow.sandbox.healthcheck import wait_healthy
from tests.fakes.local_sandbox import LocalSandbox

pytestmark = pytest.mark.anyio


async def test_waits_until_the_command_succeeds(tmp_path):
    (tmp_path / "work").mkdir()
    sandbox = LocalSandbox(tmp_path / "work")
    marker = tmp_path / "ready"
    check = HealthcheckSettings(command=f"test -f {marker}", interval_sec=0.05,
                                start_interval_sec=0.05, retries=100)

    async def become_ready() -> None:
        await anyio.sleep(0.3)
        marker.touch()

    async with anyio.create_task_group() as tg:
        tg.start_soon(become_ready)
        tries = await wait_healthy(sandbox, check)
    assert tries > 1


async def test_failures_in_the_start_period_do_not_count(tmp_path):
    (tmp_path / "work").mkdir()
    sandbox = LocalSandbox(tmp_path / "work")
    check = HealthcheckSettings(command="false", interval_sec=0.01, start_interval_sec=0.05,
                                start_period_sec=0.3, retries=1)
    started = anyio.current_time()
    with pytest.raises(SandboxStartError, match="failed 2 times in a row") as info:
        await wait_healthy(sandbox, check, what="the web server")
    assert anyio.current_time() - started >= 0.3
    assert "the web server never became healthy" in str(info.value)
    assert not info.value.retryable


def test_harbor_healthcheck_tables_load():
    config = parse_task_toml(
        'version = "1.0"\n[environment.healthcheck]\ncommand = "curl -sf localhost:8080"\n'
        'interval_sec = 2\nretries = 2\n[[steps]]\nname = "a"\n'
        '[steps.healthcheck]\ncommand = "true"\n', "t.toml")
    assert config.sandbox.healthcheck == HealthcheckSettings(
        command="curl -sf localhost:8080", interval_sec=2, retries=2)
    assert config.steps[0].healthcheck == HealthcheckSettings(command="true")
