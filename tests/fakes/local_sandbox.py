"""A host-local `Sandbox` for unit tests: real subprocesses in a temporary root dir.

It implements the whole protocol with anyio subprocesses, so the ACP client can be
driven end to end against the real scripted agent without Docker. Differences from
a container, on purpose: `user=` is ignored (everything runs as the test's user),
paths are host paths (relative ones resolve against `root`), and `env` is laid
over the host environment so `python` and `PATH` keep working.

Every argv it runs is appended to `calls`, so tests can assert that no secret ever
appeared on a command line.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream, Process

from benchflow.sandbox.base import ExecResult, SandboxCapabilities


class LocalProcess:
    """A `LiveProcess` over `anyio.abc.Process`, started in its own process group."""

    def __init__(self, process: Process) -> None:
        self._process = process

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def stdin(self) -> ByteSendStream:
        assert self._process.stdin is not None
        return self._process.stdin

    @property
    def stdout(self) -> ByteReceiveStream:
        assert self._process.stdout is not None
        return self._process.stdout

    @property
    def stderr(self) -> ByteReceiveStream:
        assert self._process.stderr is not None
        return self._process.stderr

    @property
    def returncode(self) -> int | None:
        return self._process.returncode

    async def wait(self) -> int:
        return await self._process.wait()

    async def kill(self) -> None:
        if self._process.returncode is not None:
            return
        try:
            os.killpg(self._process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self._process.kill()

    async def aclose(self) -> None:
        await self.kill()
        with anyio.CancelScope(shield=True):
            await self._process.aclose()


class LocalSandbox:
    """A `Sandbox` whose commands run on the host, under `root`."""

    capabilities = SandboxCapabilities(live_processes=True, root_exec=False)
    backend = "local"
    image: str | None = None

    @property
    def sandbox_id(self) -> str | None:
        return str(self.root) if self.started else None

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.calls: list[list[str]] = []
        self.uploads: list[tuple[str, int]] = []
        self.processes: list[LocalProcess] = []
        self.started = False

    def _path(self, path: str) -> Path:
        return Path(path) if os.path.isabs(path) else self.root / path

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        return {**os.environ, **(env or {})}

    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.started = True

    async def exec(
        self,
        cmd: Sequence[str],
        *,
        user: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> ExecResult:
        argv = [str(c) for c in cmd]
        self.calls.append(argv)
        process = await anyio.open_process(
            argv,
            cwd=self._path(cwd) if cwd else self.root,
            env=self._env(env),
            start_new_session=True,
        )
        live = LocalProcess(process)
        out, err = bytearray(), bytearray()

        async def drain(stream: ByteReceiveStream, buf: bytearray) -> None:
            async for chunk in stream:
                buf.extend(chunk)

        timed_out = False
        try:
            with anyio.move_on_after(timeout) as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(drain, live.stdout, out)
                    tg.start_soon(drain, live.stderr, err)
                    try:
                        if stdin:
                            await live.stdin.send(stdin)
                        await live.stdin.aclose()
                    except (anyio.BrokenResourceError, BrokenPipeError):
                        pass  # the command exited without reading its input
                    code = await process.wait()
            if scope.cancelled_caught:
                timed_out = True
                await live.kill()
                code = await process.wait()
        finally:
            await live.aclose()
        return ExecResult(exit_code=code, stdout=bytes(out), stderr=bytes(err), timed_out=timed_out)

    async def upload(self, src: Path, dst: str) -> None:
        target = self._path(dst)
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(src).is_dir():
            shutil.copytree(src, target, dirs_exist_ok=True)
        else:
            shutil.copy2(src, target)

    async def upload_bytes(self, data: bytes, dst: str, mode: int = 0o644) -> None:
        target = self._path(dst)
        self.uploads.append((str(target), mode))
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(target, mode)

    async def download(self, src: str, dst: Path) -> None:
        source = self._path(src)
        Path(dst).parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, dst, dirs_exist_ok=True)
        else:
            shutil.copy2(source, dst)

    async def open_process(
        self,
        cmd: Sequence[str],
        *,
        user: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> LocalProcess:
        argv = [str(c) for c in cmd]
        self.calls.append(argv)
        process = await anyio.open_process(
            argv,
            cwd=self._path(cwd) if cwd else self.root,
            env=self._env(env),
            start_new_session=True,
        )
        live = LocalProcess(process)
        self.processes.append(live)
        return live

    async def stop(self, delete: bool = True) -> None:
        for process in self.processes:
            await process.aclose()
        self.processes.clear()
        if delete:
            shutil.rmtree(self.root, ignore_errors=True)
        self.started = False
