"""Ctrl-C and SIGTERM for a running job.

First signal: no new trial starts, the job's sandboxes are removed at once (so a
trial blocked in a long command stops in whatever phase it is), running trials end
as `cancelled`, queued ones are recorded as skipped and result.json is written with
`cancelled: true`. A second signal exits at once (code 130) after writing what is
known and removing the job's sandboxes synchronously (where the backend can).
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable

import anyio
from anyio.abc import TaskGroup, TaskStatus

from benchflow.errors import BenchflowError
from benchflow.job.job import Job
from benchflow.job.models import JobResult
from benchflow.sandbox.owner import CleanupScope
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.registry import get_provider

log = logging.getLogger(__name__)

EXIT_CANCELLED = 130
SIGNALS = (signal.SIGINT, signal.SIGTERM)

Notify = Callable[[str], None]


def _provider(environment: str | SandboxProvider) -> SandboxProvider:
    return get_provider(environment) if isinstance(environment, str) else environment


def _scope(job: str | CleanupScope) -> CleanupScope:
    return job if isinstance(job, CleanupScope) else CleanupScope(job_name=job)


def remove_containers_now(job: str | CleanupScope, environment: str | SandboxProvider = "docker"
                          ) -> list[str]:
    """Remove the job's sandboxes (a job name, or a job instance's scope) with blocking
    calls while the event loop is being abandoned; returns their names. Never raises.

    Sandboxes of another live process are never touched (their lease is checked)."""
    try:
        return _provider(environment).sweep_now(_scope(job)).removed
    except BenchflowError as exc:
        log.warning("could not remove the sandboxes of job %s: %s", job, exc)
        return []


async def remove_containers(job: str | CleanupScope, environment: str | SandboxProvider = "docker"
                            ) -> list[str]:
    """Remove the job's leftover sandboxes (those of live other processes kept), without
    raising."""
    try:
        return (await _provider(environment).sweep(_scope(job))).removed
    except BenchflowError as exc:
        log.warning("could not remove the sandboxes of job %s: %s", job, exc)
        return []


def hard_exit(job: Job, environment: str | SandboxProvider, notify: Notify | None = None) -> None:
    """Write the job result as it stands, remove containers, and exit the process (130)."""
    try:
        job.cancelled = True
        job.write_result(include_running=True)
    except Exception as exc:  # noqa: BLE001 - exiting anyway
        log.warning("could not write the job result: %s", exc)
    removed = remove_containers_now(job.cleanup_scope, environment)
    if notify is not None:
        notify(f"removed {len(removed)} sandbox(es); exiting")
    os._exit(EXIT_CANCELLED)


async def _watch(job: Job, environment: str | SandboxProvider, notify: Notify | None, background: TaskGroup,
                 *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    with anyio.open_signal_receiver(*SIGNALS) as signals:
        task_status.started()
        count = 0
        async for signum in signals:
            count += 1
            if count > 1:
                hard_exit(job, environment, notify)
            if notify is not None:
                notify(f"{signal.Signals(signum).name}: cancelling the job: stopping "
                       f"{job.running} running trial(s); press Ctrl-C again to exit at once")
            job.cancel()
            background.start_soon(remove_containers, job.cleanup_scope, environment)


async def run_with_signals(job: Job, environment: str | SandboxProvider = "docker",
                           notify: Notify | None = None) -> JobResult:
    """Run `job`; SIGINT/SIGTERM cancel it as described above. Returns its result.

    After a cancelled run every sandbox of the job is removed (by its provider), so none is
    left behind even when a trial was starting its sandbox as the signal came.
    """
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(_watch, job, environment, notify, tg)
            tg.start_soon(_reclaim_loop, _provider(environment))
            result = await job.run()
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:  # the job's own error, as itself (not in a group)
        if len(group.exceptions) == 1 and isinstance(group.exceptions[0], BenchflowError):
            raise group.exceptions[0] from None
        raise
    with anyio.CancelScope(shield=True):
        if job.cancelled:
            await remove_containers(job.cleanup_scope, environment)
        await _reclaim(_provider(environment))
    return result


RECLAIM_INTERVAL_SEC = 10.0
"""How often a running job retries removing sandboxes its backend could not remove (the
daemon was restarting): they go as soon as it answers again."""


async def _reclaim(provider: SandboxProvider) -> None:
    try:
        removed = await provider.reclaim()
    except BenchflowError as exc:  # still away: the next try, or the next resume, removes them
        log.info("sandboxes left to remove later: %s", exc)
        return
    if removed:
        log.warning("removed %d sandbox(es) left by failed attempts while the backend was "
                    "away", len(removed))


async def _reclaim_loop(provider: SandboxProvider) -> None:
    while True:
        await anyio.sleep(RECLAIM_INTERVAL_SEC)
        await _reclaim(provider)


__all__ = ["EXIT_CANCELLED", "hard_exit", "remove_containers", "remove_containers_now",
           "run_with_signals"]
