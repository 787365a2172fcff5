"""Waiting until a sandbox is ready: Harbor's `[environment.healthcheck]`, Docker's semantics.

A task whose image starts a server in its entrypoint declares a command that succeeds once
the server answers; no agent runs before it does.
"""

from __future__ import annotations

import logging

import anyio

from benchflow.errors import SandboxStartError
from benchflow.sandbox.base import Sandbox
from benchflow.task.models import HealthcheckSettings

log = logging.getLogger(__name__)


async def wait_healthy(sandbox: Sandbox, check: HealthcheckSettings, *,
                       what: str = "the sandbox") -> int:
    """Run `check.command` (`sh -c`, as root) until it exits 0; returns the number of tries.

    Failures during `start_period_sec` do not count (tried every `start_interval_sec`);
    after it, more than `retries` consecutive failures (tried every `interval_sec`) fail.

    Raises:
        SandboxStartError: the check kept failing (not retried: the task decides readiness).
    """
    started = anyio.current_time()
    failures, tries = 0, 0
    while True:
        tries += 1
        result = await sandbox.exec(["sh", "-c", check.command], user="root",
                                    timeout=check.timeout_sec)
        if result.ok:
            log.info("%s is healthy after %d tries", what, tries)
            return tries
        in_start_period = anyio.current_time() - started < check.start_period_sec
        if in_start_period:
            await anyio.sleep(check.start_interval_sec)
            continue
        failures += 1
        if failures > check.retries:
            raise SandboxStartError(
                f"{what} never became healthy: `{check.command}` failed {failures} times "
                f"in a row after the {check.start_period_sec:g} s start period (last exit "
                f"{result.exit_code}): {result.text(500).strip()}")
        await anyio.sleep(check.interval_sec)


__all__ = ["wait_healthy"]
