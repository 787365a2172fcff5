"""The disk watchdog: a task's `storage_mb` enforced where the sandbox backend cannot.

Docker enforces a container's disk size only on overlay2 over xfs with project quotas;
elsewhere (overlay2 on ext4, the common case) the limit would be dropped, and one agent
could fill the daemon's disk. Where the sandbox says its backend has no quota
(`GuardedSandbox.storage_quota` False), the agent phase runs beside a watchdog that reads
the sandbox's disk use every `CHECK_INTERVAL_SEC` and, past the limit, stops every process in the sandbox
and ends the rollout with `environment_resource_exhausted`. The result's `warnings` say
that the watchdog enforced the limit (it may overshoot by what the agent writes in one
interval), so a limit is never dropped silently.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio

from benchflow.errors import BenchflowError, ResourceExhaustedError
from benchflow.sandbox.base import GuardedSandbox, Sandbox, implements

log = logging.getLogger(__name__)

CHECK_INTERVAL_SEC = 1.0
STOP_GRACE_SEC = 30.0
"""After the sandbox's processes are stopped, how long the agent phase may take to wind up
(its commands return, its output is saved) before it is cancelled."""


def watched_limit_mb(sandbox: Sandbox | None) -> int | None:
    """The storage limit the watchdog must enforce for `sandbox`, or None (the backend
    enforces it, or none is set)."""
    if not implements(sandbox, GuardedSandbox) or sandbox.storage_quota:
        return None
    return sandbox.spec.storage_mb or None


def watchdog_warning(limit_mb: int) -> str:
    return (f"storage_mb={limit_mb} is not enforced by the sandbox backend here (no storage "
            f"quota): benchflow's disk watchdog checked the sandbox every "
            f"{CHECK_INTERVAL_SEC:g} s and stops the agent past it")


async def run_watched(sandbox: Sandbox | None, work: Callable[[], Awaitable[None]],
                      interval_sec: float = CHECK_INTERVAL_SEC) -> None:
    """Run `work` (the agent phase) under the disk watchdog when the sandbox needs one.

    Raises:
        ResourceExhaustedError: the sandbox wrote past its `storage_mb` (the agent was
            stopped; whatever `work` raised meanwhile is its consequence, not the cause).
        Whatever `work` raises otherwise.
    """
    limit = watched_limit_mb(sandbox)
    if limit is None:
        await work()
        return
    assert implements(sandbox, GuardedSandbox)
    await _run_guarded(sandbox, limit, work, interval_sec)


async def _run_guarded(sandbox: GuardedSandbox, limit: int,
                       work: Callable[[], Awaitable[None]], interval_sec: float) -> None:
    # apart from run_watched: a closure's cells are made when its function is entered, so
    # an unwatched agent phase would keep eight of them alive for its whole length
    outcome: list[Exception] = []
    exceeded: list[float] = []
    done = anyio.Event()

    async def body() -> None:
        try:
            await work()
        except Exception as exc:  # noqa: BLE001 - re-raised below, after the watchdog stops
            outcome.append(exc)
        finally:
            done.set()
            tg.cancel_scope.cancel()

    async def watch() -> None:
        while True:
            await anyio.sleep(interval_sec)
            try:
                used = await sandbox.disk_usage_mb()
            except BenchflowError as exc:  # the sandbox is going away: nothing to guard
                log.debug("disk watchdog stops: %s", exc)
                return
            if used > limit:
                exceeded.append(used)
                log.warning("the sandbox wrote %.0f MB, past storage_mb=%d: stopping the agent",
                            used, limit)
                try:
                    await sandbox.stop_processes()
                    with anyio.move_on_after(STOP_GRACE_SEC):  # its commands return, output kept
                        await done.wait()
                finally:
                    tg.cancel_scope.cancel()
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(body)
        tg.start_soon(watch)
    if exceeded:
        raise ResourceExhaustedError(
            f"the sandbox wrote {exceeded[0]:.0f} MB, past the task's storage_mb={limit}: the "
            "agent was stopped; raise sandbox.storage_mb (task) or override_storage_mb (job) "
            "if the task needs more")
    if outcome:
        raise outcome[0]


__all__ = ["CHECK_INTERVAL_SEC", "STOP_GRACE_SEC", "run_watched", "watched_limit_mb", "watchdog_warning"]
