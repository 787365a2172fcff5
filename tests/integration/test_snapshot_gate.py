"""A snapshot and the sandbox's other calls never overlap (`SnapshotGate`), on a real
container: docker pauses a container while it commits it, and an exec started into the
paused container hung the daemon for that container (inspect, unpause and remove with it)
until its freezer cgroup was thawed by hand. A rollout made one: the session a role closed
after its last turn stops its agent in the background while the next turn's snapshot is
taken.

The docker calls stay real; each test only logs them in order and holds one at a chosen
point (on events). Where the gate is missing, the call that would reach the paused
container is logged and then held until the commit returned, so that a failing run never
hangs the shared daemon.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import docker
import docker.errors
import pytest

from benchflow.sandbox.docker import sandbox as docker_sandbox
from benchflow.sandbox.docker.sandbox import DockerSandbox
from benchflow.sandbox.labels import LABEL_JOB
from benchflow.sandbox.spec import SandboxSpec

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

CONTAINER_CALLS = {"commit", "exec_create", "exec_start", "_pump", "exec_inspect",
                   "put_archive", "_download"}
"""The docker calls that reach into the container (or commit it)."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def box(job_label: str) -> AsyncIterator[DockerSandbox]:
    sandbox = DockerSandbox(SandboxSpec(name="snapshot-gate", docker_image="debian:bookworm-slim",
                                        workdir="/app", labels={LABEL_JOB: job_label},
                                        storage_mb=None))
    await sandbox.start()
    try:
        yield sandbox
    finally:
        await sandbox.stop()


@pytest.fixture
def snapshot_name() -> Iterator[str]:
    name = f"benchflow-turns/pytest-gate:{secrets.token_hex(6)}"
    yield name
    try:
        docker.from_env().images.remove(name, noprune=False)
    except docker.errors.ImageNotFound:
        pass


class CallLog:
    """The sandbox's docker calls into its container, in order (`name`, then `name
    returned`); `hold` stops one (by name) before it is sent, until `release()`.

    Whatever the sandbox does, the calls reach the daemon one at a time: a test that
    finds them overlapping has not hung the daemon doing so."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, hold: str) -> None:
        self.entries: list[str] = []
        self.hold = hold
        self.held = anyio.Event()
        self._release = anyio.Event()
        self._one_at_a_time = anyio.Lock()
        self._running = 0  # docker calls in worker threads
        self._returned: anyio.Event | None = None
        self._real = docker_sandbox.docker_call
        monkeypatch.setattr(docker_sandbox, "docker_call", self._call)

    def release(self) -> None:
        self._release.set()

    def position(self, entry: str) -> int:
        assert entry in self.entries, self.entries
        return self.entries.index(entry)

    async def settled(self) -> None:
        """Until every task waits on an event (none on a docker call)."""
        while True:
            await anyio.wait_all_tasks_blocked()
            if not self._running:
                return
            self._returned = anyio.Event()
            await self._returned.wait()

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        name = getattr(fn, "__name__", "")
        if name not in CONTAINER_CALLS:
            return await self._sent(fn, *args, **kwargs)
        self.entries.append(name)
        if name == self.hold:
            self.held.set()
            await self._release.wait()
        async with self._one_at_a_time:
            result = await self._sent(fn, *args, **kwargs)
        self.entries.append(f"{name} returned")
        return result

    async def _sent(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self._running += 1
        try:
            return await self._real(fn, *args, **kwargs)
        finally:
            self._running -= 1
            if self._returned is not None:
                self._returned.set()


async def _exec(box: DockerSandbox, tmp: Path) -> None:
    assert (await box.exec(["true"])).ok


async def _upload(box: DockerSandbox, tmp: Path) -> None:
    await box.upload_bytes(b"x", "/app/uploaded.txt")


async def _download(box: DockerSandbox, tmp: Path) -> None:
    await box.download("/etc/hostname", tmp / "hostname")


async def _live_process(box: DockerSandbox, tmp: Path) -> None:
    process = await box.open_process(["cat"])
    await process.aclose()  # killed


CALLS: dict[str, tuple[Callable[[DockerSandbox, Path], Awaitable[None]], str]] = {
    "exec": (_exec, "exec_create"), "upload": (_upload, "put_archive"),
    "download": (_download, "_download"), "live-process": (_live_process, "exec_create")}
"""What a test calls, and the first docker call it makes into the container."""


@pytest.mark.parametrize("call", list(CALLS))
async def test_a_call_made_while_the_container_commits_waits_for_the_commit(
        box, snapshot_name, monkeypatch, tmp_path, call):
    run, first = CALLS[call]
    log = CallLog(monkeypatch, hold="commit")
    async with anyio.create_task_group() as tg:
        tg.start_soon(box.save_snapshot, snapshot_name, "gate test")
        await log.held.wait()  # the commit is about to pause the container
        tg.start_soon(run, box, tmp_path)
        await log.settled()  # the call went as far as it goes
        log.release()
    assert log.position(first) > log.position("commit returned"), log.entries


@pytest.mark.parametrize("call", ["exec", "upload", "download"])
async def test_a_commit_waits_for_the_calls_in_flight(box, snapshot_name, monkeypatch, tmp_path,
                                                      call):
    run, first = CALLS[call]
    log = CallLog(monkeypatch, hold=first)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, box, tmp_path)
        await log.held.wait()  # the call is in flight
        tg.start_soon(box.save_snapshot, snapshot_name, "gate test")
        await log.settled()  # the snapshot went as far as it goes
        log.release()
    assert log.position("commit") > log.position(f"{first} returned"), log.entries
    assert docker.from_env().images.get(snapshot_name).labels.get(LABEL_JOB) == ""
