"""Limits benchflow enforces itself: the disk watchdog and the download cap."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import anyio
import pytest

from benchflow.errors import AgentExecutionError, ResourceExhaustedError
from benchflow.rollout.disk_guard import run_watched, watched_limit_mb, watchdog_warning
from benchflow.sandbox.archive import extract
from benchflow.sandbox.base import GuardedSandbox
from benchflow.sandbox.spec import SandboxSpec

pytestmark = pytest.mark.anyio


class DiskSandbox:
    """Writes `step_mb` more at each look until its processes are stopped."""

    capabilities = None
    backend = "fake"
    image = None
    workdir = "/"
    sandbox_id = "fake"

    def __init__(self, storage_mb: int | None, quota: bool = False, step_mb: float = 10.0) -> None:
        self.spec = SandboxSpec(name="t", storage_mb=storage_mb)
        self.storage_quota = quota
        self.warnings: list[str] = []
        self.used = 0.0
        self.step = step_mb
        self.stopped = anyio.Event()

    async def disk_usage_mb(self) -> float:
        if not self.stopped.is_set():
            self.used += self.step
        return self.used

    async def stop_processes(self) -> None:
        self.stopped.set()

    # the rest of the Sandbox protocol (unused here)
    async def start(self) -> None: ...
    async def exec(self, cmd, **kw): ...
    async def upload(self, src, dst) -> None: ...
    async def upload_bytes(self, data, dst, mode=0o644) -> None: ...
    async def download(self, src, dst) -> None: ...
    async def open_process(self, cmd, **kw): ...
    async def stop(self, delete=True) -> None: ...


def test_the_fake_is_a_guarded_sandbox():
    assert isinstance(DiskSandbox(64), GuardedSandbox)


async def test_an_agent_writing_past_storage_mb_is_stopped():
    sandbox = DiskSandbox(64)
    assert watched_limit_mb(sandbox) == 64

    async def agent() -> None:  # runs until its processes are killed, then fails
        await sandbox.stopped.wait()
        raise AgentExecutionError("exit 137")

    with pytest.raises(ResourceExhaustedError, match="wrote 70 MB, past the task's storage_mb=64"):
        await run_watched(sandbox, agent, interval_sec=0.001)
    assert sandbox.stopped.is_set() and sandbox.used == 70


async def test_an_agent_within_its_limit_is_left_alone_and_its_error_kept():
    sandbox = DiskSandbox(10_000, step_mb=0.0)

    async def agent() -> None:
        await anyio.sleep(0.01)
        raise AgentExecutionError("its own failure")

    with pytest.raises(AgentExecutionError, match="its own failure"):
        await run_watched(sandbox, agent, interval_sec=0.001)
    assert not sandbox.stopped.is_set()


@pytest.mark.parametrize(("sandbox", "watched"), [
    (DiskSandbox(64, quota=True), None),  # the backend enforces it
    (DiskSandbox(None), None),  # no limit
    (object(), None),  # a backend that enforces its own (not a GuardedSandbox)
])
async def test_no_watchdog_where_the_backend_enforces_the_limit(sandbox, watched):
    assert watched_limit_mb(sandbox) is watched
    ran = []

    async def agent() -> None:
        ran.append(True)

    await run_watched(sandbox, agent, interval_sec=0.001)
    assert ran == [True]


def test_the_warning_says_the_limit_is_watched_not_dropped():
    assert "storage_mb=64 is not enforced by the sandbox backend" in watchdog_warning(64)


def _archive(files: dict[str, bytes]) -> list[bytes]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return [raw[i:i + 7000] for i in range(0, len(raw), 7000)]  # chunks, as a stream arrives


def test_a_download_is_streamed_and_cut_at_its_limit(tmp_path: Path):
    chunks = _archive({"logs/agent/a.txt": b"a" * 100, "logs/agent/big.bin": b"\0" * 50_000,
                       "logs/agent/z.txt": b"z"})
    consumed = []

    def stream():
        for chunk in chunks:
            consumed.append(len(chunk))
            yield chunk

    note = extract(stream(), "/logs", tmp_path / "logs", limit_bytes=10_000)
    assert note is not None and "logs/agent/big.bin (50000 bytes)" in note
    assert (tmp_path / "logs" / "agent" / "a.txt").read_bytes() == b"a" * 100
    assert not (tmp_path / "logs" / "agent" / "big.bin").exists()
    assert sum(consumed) < sum(map(len, chunks))  # the rest was never read


def test_a_download_within_its_limit_is_whole(tmp_path: Path):
    chunks = _archive({"logs/agent/a.txt": b"a" * 100, "logs/verifier/reward.txt": b"1\n"})
    assert extract(iter(chunks), "/logs", tmp_path / "logs", limit_bytes=10_000) is None
    assert (tmp_path / "logs" / "verifier" / "reward.txt").read_text() == "1\n"
