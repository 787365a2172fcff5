"""The readiness check: Docker HEALTHCHECK semantics, through a real (host-local) sandbox."""

from __future__ import annotations

import anyio
import pytest

from benchflow.errors import SandboxStartError
from benchflow.task.legacy import parse_task_toml
from benchflow.task.models import HealthcheckSettings
from benchflow.rollout.healthcheck import wait_healthy
from tests.fakes.clock import advance, wait_until
from tests.fakes.local_sandbox import LocalSandbox

pytestmark = pytest.mark.anyio


async def test_waits_until_the_command_succeeds(tmp_path):
    (tmp_path / "work").mkdir()
    sandbox = LocalSandbox(tmp_path / "work")
    count = tmp_path / "tries"  # the command fails twice, then succeeds
    check = HealthcheckSettings(
        command=f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}; "
                "[ \"$n\" -ge 2 ]", interval_sec=0.01, start_interval_sec=0.01, retries=2)
    assert await wait_healthy(sandbox, check) == 3
    assert count.read_text().strip() == "3"


async def test_failures_in_the_start_period_do_not_count(tmp_path):
    (tmp_path / "work").mkdir()
    sandbox = LocalSandbox(tmp_path / "work")
    check = HealthcheckSettings(command="false", interval_sec=0.01, start_interval_sec=0.01,
                                start_period_sec=600, retries=1)
    async with anyio.create_task_group() as tg:
        async def wait() -> None:
            with pytest.raises(SandboxStartError, match="failed 2 times in a row") as info:
                await wait_healthy(sandbox, check, what="the web server")
            errors.append(info.value)

        errors: list[SandboxStartError] = []
        tg.start_soon(wait)
        # many failures inside the start period, then the clock passes its end
        await wait_until(lambda: len(sandbox.calls) >= 5, "five failed checks")
        assert not errors
        in_period = len(sandbox.calls)
        advance(600)
    (error,) = errors
    # counted from the period's end only: 2 failures > retries (the first may be the check
    # that was running when the period ended)
    assert len(sandbox.calls) - in_period in (1, 2)
    assert "the web server never became healthy" in str(error)
    assert not error.retryable


def test_harbor_healthcheck_tables_load():
    config = parse_task_toml(
        'version = "1.0"\n[environment.healthcheck]\ncommand = "curl -sf localhost:8080"\n'
        'interval_sec = 2\nretries = 2\n[[steps]]\nname = "a"\n'
        '[steps.healthcheck]\ncommand = "true"\n', "t.toml")
    assert config.sandbox.healthcheck == HealthcheckSettings(
        command="curl -sf localhost:8080", interval_sec=2, retries=2)
    assert config.steps[0].healthcheck == HealthcheckSettings(command="true")
