"""The plumbing of the fake `modal` SDK (`tests/fakes/modal_sdk.py`): failure injection,
the `.aio` calling convention, docker calls raising Modal's exceptions, and
`ContainerProcess` with its stdin writer and stdout/stderr readers over a docker exec.
"""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio
import anyio.to_thread
import docker
import docker.errors
from modal import exception

from benchflow.sandbox.docker.process import DockerProcess

_STDIN_LIMIT = 16 * 1024 * 1024  # the SDK's TASK_COMMAND_ROUTER_MAX_BUFFER_SIZE

@dataclass
class StreamDrop:
    """Make a process's stdout fail mid-stream once, as a dropped connection does."""

    match: str
    """A substring of the exec's command line (e.g. the agent's `agent.py`)."""
    after_chunks: int
    """Chunks delivered before the drop."""
    error: BaseException


class _Injector:
    inject: ClassVar[dict[str, list[BaseException]]] = {}
    latency_sec: ClassVar[dict[str, float]] = {}
    calls: ClassVar[list[str]] = []
    stream_drops: ClassVar[list[StreamDrop]] = []

    @staticmethod
    async def _enter(call: str, *, log: bool = True) -> None:
        if log:
            _Injector.calls.append(call)
        delay = _Injector.latency_sec.get(call, 0.0)
        if delay:
            await anyio.sleep(delay)
        queue = _Injector.inject.get(call)
        if queue:
            raise queue.pop(0)


class _Aio:
    """`obj.method.aio(...)`: the only calling convention of the fake (the adapter's).

    The blocking form (`obj.method(...)`) is refused, as the real SDK warns about it
    inside an event loop."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def __get__(self, obj: Any, owner: type) -> _Bound:
        raw = getattr(self.fn, "__func__", self.fn)
        if isinstance(self.fn, staticmethod):
            return _Bound(raw, raw)
        if isinstance(self.fn, classmethod):
            return _Bound(functools.partial(raw, owner), raw)
        return _Bound(raw if obj is None else functools.partial(raw, obj), raw)


class _Bound:
    def __init__(self, target: Callable[..., Any], fn: Callable[..., Any]) -> None:
        self.aio = target
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("the fake modal SDK implements only the .aio interface")


def _docker() -> docker.DockerClient:
    return _docker_client()


@functools.cache
def _docker_client() -> docker.DockerClient:
    return docker.from_env()


async def _io(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a docker call; its failures surface as the SDK's exceptions (as the API's would)."""
    try:
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs))
    except docker.errors.NotFound as exc:
        raise exception.NotFoundError(str(exc)) from exc
    except docker.errors.APIError as exc:
        raise exception.InternalError(str(exc)) from exc


class _StreamReader(_Injector):
    """`ContainerProcess.stdout/stderr`: async iterable of chunks (bytes, or str with text)."""

    def __init__(self, stream: Any, name: str, text: bool,
                 on_eof: Callable[[], Awaitable[None]], command: str) -> None:
        self._stream = stream
        self._name = name
        self._text = text
        self._on_eof = on_eof
        self._command = command
        self._delivered = 0
        self.eof = False

    def _drop(self) -> None:
        for drop in self.stream_drops:
            if (self._name == "stdout" and drop.match in self._command
                    and self._delivered >= drop.after_chunks):
                self.stream_drops.remove(drop)
                raise drop.error

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._chunks()

    async def _chunks(self) -> AsyncGenerator[Any, None]:
        while True:
            # a dropped stream raises here; a new iteration resumes at the same offset
            await self._enter(f"{self._name}.read", log=False)
            self._drop()
            try:
                data = await self._stream.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):  # ended, or terminated
                self.eof = True
                await self._on_eof()
                return
            self._delivered += 1
            yield data.decode("utf-8") if self._text else data

    @_Aio
    async def read(self) -> Any:
        parts = [part async for part in self]
        return "".join(parts) if self._text else b"".join(parts)


class _StreamWriter(_Injector):
    """`ContainerProcess.stdin`: `write` buffers, `write_eof` marks the end, `drain` sends."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._closed = False

    def write(self, data: bytes | bytearray | memoryview | str) -> None:
        if self._closed:
            raise ValueError("Stdin is closed. Cannot write to it.")
        data = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        if len(self._buffer) + len(data) > _STDIN_LIMIT:
            raise BufferError("Buffer size exceed limit. Call drain to flush the buffer.")
        self._buffer.extend(data)

    def write_eof(self) -> None:
        self._closed = True

    @_Aio
    async def drain(self) -> None:
        await self._enter("stdin.drain", log=False)
        if self._buffer:
            try:
                await self._stream.send(bytes(self._buffer))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                raise exception.ConflictError("stdin write dropped: the process exited") from exc
            self._buffer.clear()
        if self._closed:
            await self._stream.send_eof()


class ContainerProcess(_Injector):
    """`modal.container_process.ContainerProcess` over a docker exec."""

    _open: ClassVar[dict[str, list[ContainerProcess]]] = {}
    """Processes whose socket is open, per container (closed at the end or at terminate)."""

    def __init__(self, process: DockerProcess, text: bool, deadline: float | None,
                 container_id: str, command: str = "") -> None:
        self._process = process
        self._deadline = deadline
        self._container_id = container_id
        self._returncode: int | None = None
        self.stdout = _StreamReader(process.stdout, "stdout", text, self._close_if_done, command)
        self.stderr = _StreamReader(process.stderr, "stderr", text, self._close_if_done, command)
        self.stdin = _StreamWriter(process.stdin)
        ContainerProcess._open.setdefault(container_id, []).append(self)

    async def _close_if_done(self) -> None:
        if self.stdout.eof and self.stderr.eof and self._returncode is not None:
            await self._close()

    async def _close(self) -> None:
        raw = self._process._sock
        if raw.fileno() != -1:
            anyio.notify_closing(raw)
            await self._process.aclose()
        opened = ContainerProcess._open.get(self._container_id, [])
        if self in opened:
            opened.remove(self)

    @classmethod
    async def _close_all(cls, container_id: str) -> None:
        for process in list(cls._open.pop(container_id, [])):
            await process._close()

    @property
    def returncode(self) -> int:
        if self._returncode is None:
            raise exception.InvalidError("You must call wait() before accessing the returncode. "
                                         "To poll for the status of a running process, use poll() "
                                         "instead.")
        return self._returncode

    def _finish(self, code: int) -> int:
        # the exec deadline passed (enforced by `timeout -s KILL`): the SDK reports -1
        late = self._deadline is not None and time.monotonic() >= self._deadline - 0.05
        self._returncode = -1 if code == 137 and late else code
        return self._returncode

    @_Aio
    async def wait(self) -> int:
        if self._returncode is not None:
            return self._returncode
        try:
            await self._enter("process.wait", log=False)
        except exception.ExecTimeoutError:
            self._returncode = -1  # as the SDK does when its deadline passes
            await self._process.kill()
            return -1
        code = self._finish(await self._process.wait())
        await self._close_if_done()
        return code

    @_Aio
    async def poll(self) -> int | None:
        if self._returncode is not None:
            return self._returncode
        code = self._process.returncode
        return None if code is None else self._finish(code)
