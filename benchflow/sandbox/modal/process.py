"""A live process in a Modal sandbox: a `ContainerProcess` seen as anyio byte streams.

stdin: every `send` is written and drained at once (Modal buffers `write` until `drain`),
and `send_eof` drains the EOF too. stdout/stderr: chunks of the SDK's async iterators,
split to `max_bytes`. The SDK keeps each stream's offset, so after a transient error a new
iteration resumes where the old one stopped: a dropped stream is re-opened a few times
(with backoff) before the process is treated as gone (`BrokenResourceError`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from benchflow.errors import SandboxError
from benchflow.sandbox.modal.errors import map_modal_errors, transient_classes
from benchflow.sandbox.process import StreamedProcess

log = logging.getLogger(__name__)

_CHUNK = 8 * 1024 * 1024
"""Bytes per drain: under the SDK's 16 MiB stdin buffer limit."""


class _Output(ByteReceiveStream):
    def __init__(self, reader: Any, name: str, retries: int, backoff_sec: float) -> None:
        self._reader = reader
        self._name = name
        self._retries = retries
        self._backoff_sec = backoff_sec
        self._it: AsyncIterator[bytes] | None = None
        self._buf = memoryview(b"")
        self._eof = False

    async def _pull(self) -> bytes | None:
        for attempt in range(self._retries + 1):
            if self._it is None:
                self._it = aiter(self._reader)
            try:
                chunk = await anext(self._it)
            except StopAsyncIteration:
                return None
            except transient_classes() as exc:
                self._it = None  # the SDK resumes at its offset on the next iteration
                if attempt == self._retries:
                    raise anyio.BrokenResourceError(
                        f"modal {self._name} stream lost: {exc}") from exc
                log.warning("modal %s stream dropped (%s): resuming", self._name, exc)
                await anyio.sleep(self._backoff_sec * 2 ** attempt)
                continue
            return chunk.encode() if isinstance(chunk, str) else chunk
        raise AssertionError("unreachable")  # pragma: no cover

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while not self._buf:
            if self._eof:
                raise anyio.EndOfStream
            chunk = await self._pull()
            if chunk is None:
                self._eof = True
                raise anyio.EndOfStream
            self._buf = memoryview(chunk)
        data, self._buf = self._buf[:max_bytes], self._buf[max_bytes:]
        return bytes(data)

    async def aclose(self) -> None:
        self._eof, self._buf = True, memoryview(b"")


class _Input(ByteSendStream):
    def __init__(self, writer: Any) -> None:
        self._writer = writer
        self._closed = False

    async def _drain(self) -> None:
        try:
            with map_modal_errors():
                await self._writer.drain.aio()
        except SandboxError as exc:  # e.g. the process exited: its stdin is gone
            raise anyio.BrokenResourceError(str(exc)) from exc

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        view = memoryview(item)
        while view:
            try:
                self._writer.write(view[:_CHUNK])
            except (ValueError, BufferError) as exc:
                raise anyio.BrokenResourceError(str(exc)) from exc
            view = view[_CHUNK:]
            await self._drain()

    async def send_eof(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.write_eof()
        await self._drain()

    async def aclose(self) -> None:
        try:
            await self.send_eof()
        except anyio.BrokenResourceError:
            pass


class ModalProcess(StreamedProcess):
    """`LiveProcess` over a Modal `ContainerProcess`; `kill` runs `killer` (which signals the
    process group inside the sandbox: Modal has no kill call for an exec)."""

    def __init__(self, process: Any, killer: Callable[[], Awaitable[None]], *,
                 stream_retries: int = 3, backoff_sec: float = 0.5) -> None:
        self._process = process
        self._killer = killer
        self._stdin = _Input(process.stdin)
        self._stdout = _Output(process.stdout, "stdout", stream_retries, backoff_sec)
        self._stderr = _Output(process.stderr, "stderr", stream_retries, backoff_sec)
        self._returncode: int | None = None

    async def wait(self) -> int:
        if self._returncode is None:
            with map_modal_errors():
                self._returncode = int(await self._process.wait.aio())
        return self._returncode

    async def _release(self) -> None:
        await self._stdin.aclose()


__all__ = ["ModalProcess"]
