"""A live process in a Daytona sandbox: a session command seen as anyio byte streams.

Daytona has no exec with attached streams; a command started in its own session with
`execute_session_command(run_async=True)` is the live process:

- stdin: `send_session_command_input` writes text to the command's input FIFO, with the
  echo into the log turned off (`suppress_input_echo`). The daemon appends a newline to
  every write and never closes the FIFO, so the command runs behind
  `scripts/session_launch.sh`, which reads length-prefixed frames (`<n>\\n<n bytes>\\n`)
  and closes the command's stdin at a non-numeric header. The API carries text: bytes
  are decoded as UTF-8 (invalid sequences replaced), which JSON-RPC never needs.
- stdout/stderr: the log stream (`get_session_command_logs_async`) calls back with text
  the SDK decoded leniently; a background task files it, re-encoded, under its stream.
  A log stream that ends or fails before the command has an exit code is re-opened with
  backoff (Daytona replays the log from the start, so what was delivered is skipped);
  after `stream_retries` re-opens both streams fail with `BrokenResourceError` caused by
  a `SandboxExecError`, instead of waiting forever.
- exit code: `get_session_command(...).exit_code`; `kill` signals the process group
  inside the sandbox; `aclose` also deletes the session (which ends what is left).
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from benchflow.errors import SandboxError, SandboxExecError
from benchflow.sandbox.daytona.errors import map_daytona_errors
from benchflow.sandbox.process import StreamedProcess

log = logging.getLogger(__name__)

_FRAME_CHARS = 1024 * 1024
"""Characters per input request: a 5 MB JSON line goes as a few bounded requests."""
_EXIT_GRACE_SEC = 3.0
"""How long an ended log stream may wait for the exit code before it counts as dropped."""


class _Output(ByteReceiveStream):
    """One output stream: chunks filed by the pump, then EOF or the pump's failure."""

    def __init__(self) -> None:
        self.sink: MemoryObjectSendStream[bytes]
        self.sink, self._source = _channel()
        self.failure: SandboxError | None = None
        self._buf = b""

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._buf:
            try:
                self._buf = await self._source.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                if self.failure is not None:
                    raise anyio.BrokenResourceError(str(self.failure)) from self.failure
                raise anyio.EndOfStream from None
        data, self._buf = self._buf[:max_bytes], self._buf[max_bytes:]
        return data

    async def aclose(self) -> None:
        self.sink.close()
        self._source.close()
        self._buf = b""


def _channel() -> tuple[MemoryObjectSendStream[bytes], MemoryObjectReceiveStream[bytes]]:
    # unbounded: a reader of stdout must never wait on an unread stderr (or the reverse)
    return anyio.create_memory_object_stream[bytes](math.inf)


class _Input(ByteSendStream):
    """stdin as frames through `send_session_command_input`, one request at a time."""

    def __init__(self, send: Callable[[str], Awaitable[None]]) -> None:
        self._send = send
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._lock = anyio.Lock()
        self._closed = False

    async def _frame(self, data: str) -> None:
        try:
            with map_daytona_errors():
                await self._send(data)
        except SandboxError as exc:  # e.g. the command exited: its input is gone
            raise anyio.BrokenResourceError(str(exc)) from exc

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        text = self._decoder.decode(bytes(item))
        async with self._lock:
            for start in range(0, len(text), _FRAME_CHARS):
                piece = text[start:start + _FRAME_CHARS]
                await self._frame(f"{len(piece.encode())}\n{piece}\n")

    async def send_eof(self) -> None:
        if self._closed:
            return
        self._closed = True
        rest = self._decoder.decode(b"", final=True)
        async with self._lock:
            if rest:
                await self._frame(f"{len(rest.encode())}\n{rest}\n")
            await self._frame("eof\n")

    async def aclose(self) -> None:
        try:
            await self.send_eof()
        except anyio.BrokenResourceError:
            pass

    def discard(self) -> None:
        """Refuse further writes without sending anything."""
        self._closed = True


class DaytonaProcess(StreamedProcess):
    """`LiveProcess` over one Daytona session command (`process` is `sandbox.process`);
    `kill` runs `killer`, which signals the process group inside the sandbox."""

    def __init__(self, process: Any, session_id: str, command_id: str,
                 killer: Callable[[], Awaitable[None]], *, stream_retries: int = 3,
                 backoff_sec: float = 0.5) -> None:
        self._process = process
        self._session_id = session_id
        self._command_id = command_id
        self._killer = killer
        self._retries = stream_retries
        self._backoff_sec = backoff_sec
        self._stdin = _Input(self._send_input)
        self._stdout = _Output()
        self._stderr = _Output()
        self._returncode: int | None = None
        self._pump_done = anyio.Event()
        self._pump = asyncio.get_running_loop().create_task(
            self._run_pump(), name=f"daytona-logs-{command_id}")

    async def _send_input(self, data: str) -> None:
        await self._process.send_session_command_input(self._session_id, self._command_id, data)

    async def _exit_code(self) -> int | None:
        if self._returncode is None:
            with map_daytona_errors():
                command = await self._process.get_session_command(self._session_id,
                                                                  self._command_id)
            if command.exit_code is not None:
                self._returncode = int(command.exit_code)
        return self._returncode

    async def _exited_within(self, seconds: float) -> bool:
        delay = 0.05
        with anyio.move_on_after(seconds):
            while await self._exit_code() is None:
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.5)
            return True
        return False

    async def _run_pump(self) -> None:
        """Follow the log until the command has exited; re-open a dropped stream."""
        delivered = {"stdout": 0, "stderr": 0}
        failure: SandboxError | None = None
        try:
            for attempt in range(self._retries + 1):
                if attempt:
                    await anyio.sleep(self._backoff_sec * 2 ** (attempt - 1))
                try:
                    await self._follow(delivered)
                    failure = None
                except SandboxError as exc:
                    failure = exc
                try:
                    if await self._exited_within(_EXIT_GRACE_SEC):
                        failure = None  # whatever the stream said, the command has ended
                        return
                except SandboxError as exc:
                    failure = exc
                if attempt < self._retries:
                    log.warning("daytona log stream of command %s ended early (%s): re-opening",
                                self._command_id, failure or "closed")
            failure = SandboxExecError(
                f"daytona log stream of command {self._command_id} lost "
                f"{self._retries + 1} times: {failure or 'closed before the command exited'}",
                transient=True)
        except Exception as exc:  # never leave the readers waiting on a pump that died
            failure = SandboxExecError(f"daytona log stream failed: {exc!r}", transient=True)
            log.exception("daytona log pump of command %s failed", self._command_id)
        finally:
            for stream in (self._stdout, self._stderr):
                stream.failure = failure
                stream.sink.close()
            self._pump_done.set()

    async def _follow(self, delivered: dict[str, int]) -> None:
        """One pass over the log stream; skips the characters earlier passes delivered."""
        seen = {"stdout": 0, "stderr": 0}

        def handler(name: str, stream: _Output) -> Callable[[str], None]:
            def on_text(text: str) -> None:
                skip = delivered[name] - seen[name]
                seen[name] += len(text)
                if skip >= len(text):
                    return
                text = text[max(skip, 0):]
                delivered[name] += len(text)
                try:
                    stream.sink.send_nowait(text.encode())
                except anyio.ClosedResourceError:
                    pass  # the reader closed its stream: drop what it no longer wants
            return on_text

        with map_daytona_errors():
            await self._process.get_session_command_logs_async(
                self._session_id, self._command_id, handler("stdout", self._stdout),
                handler("stderr", self._stderr))

    async def wait(self) -> int:
        """The exit code, once the log stream has ended with the command.

        Raises:
            SandboxExecError: the log stream was lost (`stream_retries` re-opens failed),
                so the process can no longer be followed (it is killed at `aclose`).
        """
        await self._pump_done.wait()  # the log ends when the command does
        if self._stdout.failure is not None:
            raise self._stdout.failure
        delay = 0.05
        while (code := await self._exit_code()) is None:
            await anyio.sleep(delay)
            delay = min(delay * 2, 1.0)
        return code

    async def _release(self) -> None:
        self._pump.cancel()
        await asyncio.wait([self._pump], timeout=5)
        self._stdin.discard()  # the session's deletion ends the command's input
        try:
            with map_daytona_errors():
                await self._process.delete_session(self._session_id)
        except SandboxError as exc:
            log.info("could not delete daytona session %s: %s", self._session_id, exc)


__all__ = ["DaytonaProcess"]
