"""A live process inside a Docker container, over the daemon's hijacked exec socket.

Docker multiplexes stdout and stderr on one socket in frames (8-byte header: stream
id, three zero bytes, big-endian length). Reading is pull-based and needs no
background task: whichever stream is read pulls the next frame and files it under
its stream, so a reader of stdout never starves a reader of stderr.
"""

from __future__ import annotations

import io
import logging
import socket
import struct
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from benchflow.errors import SandboxExecError
from benchflow.sandbox.process import StreamedProcess

log = logging.getLogger(__name__)

FRAME_HEADER = struct.Struct(">BxxxL")
"""A frame of the daemon's multiplexed exec stream: stream id (1 stdout, 2 stderr), size."""


START_TIMEOUT_SEC = 60.0


def wait_started(api: Any, exec_ids: Iterable[str], timeout_sec: float = START_TIMEOUT_SEC
                 ) -> None:
    """Until each exec runs its process (or has ended). The daemon answers `exec_start`'s
    upgrade before it starts the process (~50-100 ms later): a commit pausing the container
    meanwhile hangs the daemon for it, so a snapshot first waits here. Blocking (a worker
    thread).

    Raises:
        SandboxExecError: an exec did not start within `timeout_sec`.
    """
    import docker.errors

    deadline = time.monotonic() + timeout_sec
    for exec_id in exec_ids:
        delay = 0.005
        while True:
            try:
                info = api.exec_inspect(exec_id)
            except docker.errors.NotFound:
                break
            if info.get("Pid") or not info.get("Running"):
                break
            if time.monotonic() > deadline:
                raise SandboxExecError(f"exec {exec_id[:12]} did not start within "
                                       f"{timeout_sec:.0f}s", transient=True)
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


def buffered_reader(response: object) -> io.BufferedReader | None:
    """http.client's buffered reader under an exec's upgraded HTTP `response` (a requests
    response): the bytes that came in the same packet as the `101 UPGRADED` headers are in
    its buffer, and the raw socket under it never gives them again."""
    return getattr(getattr(getattr(response, "raw", None), "_fp", None), "fp", None)


class _SocketReader:
    """Demultiplexes frames from the raw socket into per-stream buffers."""

    def __init__(self, sock: socket.socket, pending: bytes = b"") -> None:
        self._sock = sock
        self._lock = anyio.Lock()
        self._buffers: dict[int, deque[bytes]] = {1: deque(), 2: deque()}
        self._pending = pending
        """Bytes read from the socket but not framed yet."""
        self.eof = False

    async def _recv(self, n: int) -> bytes:
        while True:
            try:
                return self._sock.recv(n)
            except BlockingIOError:
                await anyio.wait_readable(self._sock)
            except OSError:
                return b""

    async def _read_exact(self, n: int) -> bytes | None:
        while len(self._pending) < n:
            chunk = await self._recv(max(n - len(self._pending), 65536))
            if not chunk:
                return None
            self._pending += chunk
        data, self._pending = self._pending[:n], self._pending[n:]
        return data

    async def _read_frame(self) -> None:
        header = await self._read_exact(FRAME_HEADER.size)
        if header is None:
            self.eof = True
            return
        stream_id, size = FRAME_HEADER.unpack(header)
        payload = await self._read_exact(size) if size else b""
        if payload is None:
            self.eof = True
            return
        if stream_id in self._buffers and payload:
            self._buffers[stream_id].append(payload)

    async def receive(self, stream_id: int, max_bytes: int) -> bytes:
        buffer = self._buffers[stream_id]
        while not buffer:
            if self.eof:
                raise anyio.EndOfStream
            async with self._lock:
                if not buffer and not self.eof:
                    await self._read_frame()
        data = buffer.popleft()
        if len(data) > max_bytes:
            buffer.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        return data


class _ReceiveStream(ByteReceiveStream):
    def __init__(self, reader: _SocketReader, stream_id: int) -> None:
        self._reader = reader
        self._stream_id = stream_id

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._reader.receive(self._stream_id, max_bytes)

    async def aclose(self) -> None:
        pass


class _SendStream(ByteSendStream):
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._closed = False

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        view = memoryview(item)
        while view:
            try:
                sent = self._sock.send(view)
            except BlockingIOError:
                await anyio.wait_writable(self._sock)
                continue
            except OSError as exc:
                raise anyio.BrokenResourceError from exc
            view = view[sent:]

    async def send_eof(self) -> None:
        if not self._closed:
            self._closed = True
            try:
                self._sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    async def aclose(self) -> None:
        await self.send_eof()


def _buffered(keepalive: object) -> bytes:
    """What http.client read past the exec's `101 UPGRADED` headers into its buffer
    (`buffered_reader`). The socket is non-blocking by now, so this reads the buffer only."""
    reader = buffered_reader(getattr(keepalive, "_response", None))  # set by exec_start
    return reader.peek() if reader is not None else b""


class DockerProcess(StreamedProcess):
    """`LiveProcess` over a Docker exec: stdin, demultiplexed stdout/stderr, exit code, kill."""

    def __init__(
        self,
        sock: socket.socket,
        keepalive: object,
        exit_code: Callable[[], Awaitable[int | None]],
        killer: Callable[[], Awaitable[None]],
    ) -> None:
        sock.setblocking(False)
        self._sock = sock
        self._keepalive = keepalive  # the HTTP response owning the socket must outlive it
        self._reader = _SocketReader(sock, _buffered(keepalive))
        self._stdin = _SendStream(sock)
        self._stdout = _ReceiveStream(self._reader, 1)
        self._stderr = _ReceiveStream(self._reader, 2)
        self._exit_code = exit_code
        self._killer = killer
        self._returncode: int | None = None

    async def wait(self) -> int:
        while self._returncode is None:
            code = await self._exit_code()
            if code is not None:
                self._returncode = code
                break
            await anyio.sleep(0.05)
        return self._returncode

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._sock.fileno() == -1:
                return
            await self.kill()
            await self._stdin.aclose()
            close = getattr(self._keepalive, "close", None)
            if close is not None:
                close()
            self._sock.close()
