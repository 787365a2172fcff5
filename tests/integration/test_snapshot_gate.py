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
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from pathlib import Path
from typing import Any

import anyio
import docker
import docker.errors
import pytest

from benchflow.sandbox.docker import sandbox as docker_sandbox
from benchflow.sandbox.docker.process import wait_started
from benchflow.sandbox.docker.sandbox import DockerSandbox
from benchflow.sandbox.labels import LABEL_JOB
from benchflow.sandbox.registry import get_provider
from benchflow.sandbox.spec import SandboxSpec
from tests.fakes import modal_sdk
from tests.fakes.modal_process import _Aio

from .test_modal_fake_e2e import _reset_fake  # noqa: F401 - autouse: a fresh fake per test

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

CONTAINER_CALLS = {"commit", "exec_create", "exec_start", "pump", "exec_inspect",
                   "put_archive", "download", "wait_started"}
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
    """Calls into one sandbox's container, in order (`name`, then `name returned`);
    `hold` stops one (by name) before it is sent, until `release()`. `send` makes a call
    (the function the log stands in for).

    Whatever the sandbox does, the calls are sent one at a time: a test that finds them
    overlapping has not hung the daemon doing so."""

    def __init__(self, hold: str, send: Callable[..., Awaitable[Any]],
                 logged: Collection[str]) -> None:
        self.entries: list[str] = []
        self.hold = hold
        self.held = anyio.Event()
        self._send = send
        self._logged = logged
        self._release = anyio.Event()
        self._one_at_a_time = anyio.Lock()
        self._running = 0  # calls sent, not yet answered
        self._returned: anyio.Event | None = None

    def release(self) -> None:
        self._release.set()

    def position(self, entry: str) -> int:
        assert entry in self.entries, self.entries
        return self.entries.index(entry)

    async def settled(self) -> None:
        """Until every task waits on an event (none on a call sent)."""
        while True:
            await anyio.wait_all_tasks_blocked()
            if not self._running:
                return
            self._returned = anyio.Event()
            await self._returned.wait()

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        name = getattr(fn, "__name__", "")
        if name not in self._logged:
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
            return await self._send(fn, *args, **kwargs)
        finally:
            self._running -= 1
            if self._returned is not None:
                self._returned.set()


def _docker_calls_logged(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, api: Any,
                         hold: str, logged: Collection[str]) -> CallLog:
    """`owner.name` (a function running docker calls in worker threads) through a
    `CallLog`; an exec it starts is waited for until it runs (`api`: the client's)."""
    real = getattr(owner, name)

    async def send(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        result = await real(fn, *args, **kwargs)
        if getattr(fn, "__name__", "") == "exec_start":  # not left starting under a commit
            await real(wait_started, api(), [args[0]])
        return result

    log = CallLog(hold, send, logged)
    monkeypatch.setattr(owner, name, log.call)
    return log


def docker_log(monkeypatch: pytest.MonkeyPatch, hold: str) -> CallLog:
    """The docker sandbox's calls (`docker_call`)."""
    return _docker_calls_logged(monkeypatch, docker_sandbox, "docker_call",
                                lambda: docker_sandbox.docker_client().api, hold,
                                CONTAINER_CALLS)


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
    "download": (_download, "download"), "live-process": (_live_process, "exec_create")}
"""What a test calls, and the first docker call it makes into the container."""


@pytest.mark.parametrize("call", list(CALLS))
async def test_a_call_made_while_the_container_commits_waits_for_the_commit(
        box, snapshot_name, monkeypatch, tmp_path, call):
    run, first = CALLS[call]
    log = docker_log(monkeypatch, hold="commit")
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
    log = docker_log(monkeypatch, hold=first)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, box, tmp_path)
        await log.held.wait()  # the call is in flight
        tg.start_soon(box.save_snapshot, snapshot_name, "gate test")
        await log.settled()  # the snapshot went as far as it goes
        log.release()
    assert log.position("commit") > log.position(f"{first} returned"), log.entries
    assert docker.from_env().images.get(snapshot_name).labels.get(LABEL_JOB) == ""


async def test_a_live_process_started_before_a_snapshot_runs_before_the_commit(
        box, snapshot_name, monkeypatch):
    # the daemon answers exec_start before the process runs: a commit right then would
    # pause the container under the starting exec
    log = docker_log(monkeypatch, hold="")
    process = await box.open_process(["cat"])
    try:
        await box.save_snapshot(snapshot_name, "gate test")
        await process.stdin.send(b"still here\n")
        assert await process.stdout.receive() == b"still here\n"
    finally:
        await process.aclose()
    assert (log.position("exec_start returned") < log.position("wait_started")
            < log.position("wait_started returned") < log.position("commit")), log.entries


# -- modal: benchflow's modal sandbox, and the fake SDK itself ----------------------------

FAKE_CALLS = {"commit", "exec_create", "exec_start", "exec_run", "put_archive", "get_archive",
              "wait_started"}
"""The fake's docker calls into its container (or committing it)."""
SDK_CALLS = {"exec", "snapshot_filesystem", "write_bytes"}


def fake_log(monkeypatch: pytest.MonkeyPatch, hold: str) -> CallLog:
    """The fake SDK's docker calls (its `_io`), below its own order of calls."""
    return _docker_calls_logged(monkeypatch, modal_sdk, "_io", lambda: modal_sdk._docker().api,
                                hold, FAKE_CALLS)


def sdk_log(monkeypatch: pytest.MonkeyPatch, hold: str) -> CallLog:
    """benchflow's calls of the SDK (`exec`, `snapshot_filesystem`, `write_bytes`)."""
    async def send(fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        return await fn(*args, **kwargs)

    log = CallLog(hold, send, SDK_CALLS)

    def logged(name: str, raw: Callable[..., Awaitable[Any]]) -> _Aio:
        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            async def call(*args: Any, **kwargs: Any) -> Any:
                return await raw(self, *args, **kwargs)
            call.__name__ = name
            return await log.call(call, *args, **kwargs)
        return _Aio(method)

    for cls in (modal_sdk.Sandbox, modal_sdk.SandboxFilesystem):
        for name in SDK_CALLS & set(vars(cls)):
            monkeypatch.setattr(cls, name, logged(name, vars(cls)[name].fn))
    return log


@pytest.fixture
async def modal_box(job_label: str) -> AsyncIterator[Any]:
    box = get_provider("modal", modal_sdk.PROVIDER_CONFIG).create(SandboxSpec(
        name="snapshot-gate", docker_image="debian:bookworm-slim", workdir="/app",
        labels={LABEL_JOB: job_label}))
    await box.start()
    try:
        yield box
    finally:
        await box.stop()


MODAL_CALLS: dict[str, tuple[Callable[[Any, Path], Awaitable[None]], str]] = {
    "exec": (_exec, "exec"), "upload": (_upload, "write_bytes"),
    "download": (_download, "exec"), "live-process": (_live_process, "exec")}


@pytest.mark.parametrize("call", list(MODAL_CALLS))
async def test_modal_a_call_made_while_the_sandbox_snapshots_waits_for_it(
        modal_box, monkeypatch, tmp_path, call):
    run, first = MODAL_CALLS[call]
    log = sdk_log(monkeypatch, hold="snapshot_filesystem")
    async with anyio.create_task_group() as tg:
        tg.start_soon(modal_box.save_snapshot, "pytest-gate:0", "gate test")
        await log.held.wait()
        tg.start_soon(run, modal_box, tmp_path)
        await log.settled()
        log.release()
    assert log.position(first) > log.position("snapshot_filesystem returned"), log.entries


@pytest.mark.parametrize("call", ["exec", "upload"])
async def test_modal_a_snapshot_waits_for_the_calls_in_flight(modal_box, monkeypatch, tmp_path,
                                                              call):
    run, first = MODAL_CALLS[call]
    log = sdk_log(monkeypatch, hold=first)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, modal_box, tmp_path)
        await log.held.wait()
        tg.start_soon(modal_box.save_snapshot, "pytest-gate:0", "gate test")
        await log.settled()
        log.release()
    assert log.position("snapshot_filesystem") > log.position(f"{first} returned"), log.entries


@pytest.fixture
async def fake_sandbox(job_label: str) -> AsyncIterator[Any]:
    """A sandbox of the fake SDK, called directly (no benchflow in between)."""
    app = await modal_sdk.App.lookup.aio("pytest-gate", create_if_missing=True)
    box = await modal_sdk.Sandbox.create.aio(app=app, tags={LABEL_JOB: job_label})
    try:
        yield box
    finally:
        await box.terminate.aio()


async def _fake_exec(box: Any) -> None:
    process = await box.exec.aio("true", text=False)
    await process.stdout.read.aio()
    await process.stderr.read.aio()
    assert await process.wait.aio() == 0


async def _fake_write(box: Any) -> None:
    await box.filesystem.write_bytes.aio(b"x", "/tmp/written.txt")


async def _fake_read(box: Any) -> None:
    assert await box.filesystem.read_bytes.aio("/etc/hostname")


FAKE_SDK_CALLS: dict[str, tuple[Callable[[Any], Awaitable[None]], str]] = {
    "exec": (_fake_exec, "exec_create"), "write": (_fake_write, "exec_run"),
    "read": (_fake_read, "get_archive")}


@pytest.mark.parametrize("call", list(FAKE_SDK_CALLS))
async def test_the_fake_holds_a_call_made_while_it_commits(fake_sandbox, monkeypatch, call):
    run, first = FAKE_SDK_CALLS[call]
    log = fake_log(monkeypatch, hold="commit")
    async with anyio.create_task_group() as tg:
        tg.start_soon(fake_sandbox.snapshot_filesystem.aio)
        await log.held.wait()
        tg.start_soon(run, fake_sandbox)
        await log.settled()
        log.release()
    assert log.position(first) > log.position("commit returned"), log.entries


@pytest.mark.parametrize("call", list(FAKE_SDK_CALLS))
async def test_the_fake_commits_after_the_calls_in_flight(fake_sandbox, monkeypatch, call):
    run, first = FAKE_SDK_CALLS[call]
    log = fake_log(monkeypatch, hold=first)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run, fake_sandbox)
        await log.held.wait()
        tg.start_soon(fake_sandbox.snapshot_filesystem.aio)
        await log.settled()
        log.release()
    assert log.position("commit") > log.position(f"{first} returned"), log.entries


async def test_the_fake_commits_once_its_execs_run(fake_sandbox, monkeypatch):
    log = fake_log(monkeypatch, hold="")
    process = await fake_sandbox.exec.aio("cat", text=False)
    await fake_sandbox.snapshot_filesystem.aio()
    process.stdin.write(b"still here\n")
    process.stdin.write_eof()
    await process.stdin.drain.aio()
    assert await process.stdout.read.aio() == b"still here\n"
    assert await process.wait.aio() == 0
    assert (log.position("exec_start returned") < log.position("wait_started returned")
            < log.position("commit")), log.entries
