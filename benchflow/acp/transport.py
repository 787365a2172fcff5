"""An ACP message transport over a process running in a sandbox.

The SDK's `Connection` speaks to an `acp._transport.Transport` (send / receive /
close of decoded JSON-RPC dicts). `ProcessTransport` implements it over a
`LiveProcess`: newline-delimited JSON on the agent's stdin and stdout, lines of
any length (a 5 MB update is one line), and stdout lines that are not JSON-RPC
kept aside as "noise" instead of killing the session.

`receive()` is called by exactly one task (the SDK's receive loop), in wire order;
its `on_receive` hook runs synchronously there, before the message is handed to
the SDK (which dispatches notifications as concurrent tasks). That is where the
session numbers updates, so the trajectory keeps wire order. With an `on_updates`
hook, session/update notifications read one after another go to it together, as a
run in wire order (at most `UPDATES_PER_STEP`), and every other message to
`on_receive`: what is the same for a run is then done once per run, not per update.
`on_drained` runs when every line read so far is handled, before waiting for more
output (where the session flushes the trajectory: at most once per read, not once
per update).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import anyio
import orjson

from benchflow.sandbox.base import LiveProcess

logger = logging.getLogger(__name__)

READ_CHUNK_BYTES = 1 << 16
MAX_LINE_BYTES = 256 * 1024 * 1024
"""A line longer than this is dropped (recorded as noise) rather than buffered."""


class StdoutNoise:
    """Non-JSON-RPC lines the agent printed on stdout: counted, the last few kept,
    all appended to `path` when one is given (each cut at 64 KiB)."""

    def __init__(self, path: Path | None = None, keep: int = 50, max_chars: int = 4096) -> None:
        self.path = path
        self.count = 0
        self.recent: deque[str] = deque(maxlen=keep)
        self._max_chars = max_chars
        self._file: IO[bytes] | None = None

    def add(self, line: bytes) -> None:
        self.count += 1
        text = line[: self._max_chars].decode("utf-8", "replace")
        self.recent.append(text)
        if self.count <= 3:
            logger.warning("agent printed a non-JSON-RPC line on stdout (kept): %.200s", text)
        if self.path is not None:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("ab")
            self._file.write(line[: 1 << 16] + b"\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


UPDATES_PER_STEP = 64
"""Recorded update notifications handled between two yields to the event loop (~0.2 ms
of it): hundreds of sessions must not each hold the loop for a whole burst, and a read
of a few dozen lines is handled in one step."""


class ProcessTransport:
    """`acp._transport.Transport` over a sandbox process's stdin/stdout."""

    def __init__(
        self,
        process: LiveProcess,
        *,
        on_receive: Callable[[dict[str, Any]], None] | None = None,
        on_updates: Callable[[list[dict[str, Any]]], None] | None = None,
        on_drained: Callable[[], None] | None = None,
        noise: StdoutNoise | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self._process = process
        self._on_receive = on_receive
        self._on_updates = on_updates
        self._on_drained = on_drained
        self.noise = noise or StdoutNoise()
        self._max_line = max_line_bytes
        self._lines: deque[bytes] = deque()
        self._ahead: dict[str, Any] | None = None
        """A message decoded while gathering a run of updates, handled next."""
        self._partial: list[bytes] = []
        self._partial_size = 0
        self._skipping = False  # inside an over-long line, dropping until its newline
        self._eof = False
        self._send_lock = anyio.Lock()
        self.bytes_received = 0

    async def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        async with self._send_lock:  # one message at a time: SDK tasks send concurrently
            await self._process.stdin.send(data)

    async def receive(self) -> dict[str, Any] | None:
        """The next JSON-RPC message, or None at end of stream."""
        handled = 0
        lines = self._lines
        while True:
            while lines or self._ahead is not None:
                message, self._ahead = self._ahead, None
                if message is None and (message := self._decode(lines.popleft())) is None:
                    continue
                if self._on_updates is not None and _is_update_notification(message):
                    # (no run or message left alive in this frame while it waits)
                    handled += self._hand_run(message)
                    message = None
                    if handled >= UPDATES_PER_STEP:
                        # a burst of updates is one loop step per few dozen: hundreds of
                        # sessions must not hold the event loop for a whole burst each
                        handled = 0
                        await anyio.lowlevel.checkpoint()
                    continue  # recorded; the SDK would only call a no-op (see below)
                if self._on_receive is not None:
                    try:
                        self._on_receive(message)
                    except Exception:  # a recording failure must not kill the connection
                        logger.exception("on_receive hook failed")
                    else:
                        if _is_update_notification(message):
                            # Recorded above; the SDK would only spawn a task, validate and
                            # call our no-op Client.session_update (40% of the client's CPU).
                            handled += 1
                            if handled >= UPDATES_PER_STEP:
                                handled = 0
                                await anyio.lowlevel.checkpoint()
                            continue
                return message
            if self._on_drained is not None:
                try:
                    self._on_drained()  # all read lines handled: e.g. flush the trajectory
                except Exception:
                    logger.exception("on_drained hook failed")
            if self._eof:
                return None
            try:
                chunk = await self._process.stdout.receive(READ_CHUNK_BYTES)
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._eof = True
                if self._partial and not self._skipping:
                    self._lines.append(b"".join(self._partial))
                self._partial, self._partial_size = [], 0
                continue
            self.bytes_received += len(chunk)
            self._feed(chunk)

    def _hand_run(self, first: dict[str, Any]) -> int:
        """Hand `first` and the update notifications read right after it (up to
        `UPDATES_PER_STEP`) to `on_updates`; the next other message waits in `_ahead`.
        Returns how many."""
        run, lines, decode, loads = [first], self._lines, self._decode, orjson.loads
        while lines and len(run) < UPDATES_PER_STEP:
            line = lines.popleft()
            try:  # most lines: one JSON object, as `_decode` would read it
                message = loads(line)
            except ValueError:
                message = None
            if type(message) is not dict:  # noise, blank, or what only `json` reads
                message = decode(line)
                if message is None:
                    continue
            if message.get("method") != "session/update" or "id" in message:
                self._ahead = message
                break
            run.append(message)
        try:
            self._on_updates(run)  # type: ignore[misc]
        except Exception:  # a recording failure must not kill the connection
            logger.exception("on_updates hook failed")
        return len(run)

    def _feed(self, chunk: bytes) -> None:
        parts = chunk.split(b"\n")
        if len(parts) == 1:
            self._append_partial(chunk)
            return
        if self._skipping:
            self._skipping = False
        else:
            self._partial.append(parts[0])
            self._lines.append(b"".join(self._partial))
        self._lines.extend(parts[1:-1])
        self._partial, self._partial_size = [], 0
        if parts[-1]:
            self._append_partial(parts[-1])

    def _append_partial(self, piece: bytes) -> None:
        if self._skipping:
            return
        self._partial.append(piece)
        self._partial_size += len(piece)
        if self._partial_size > self._max_line:
            head = b"".join(self._partial)[:200]
            self.noise.add(b"[line over %d bytes dropped] " % self._max_line + head)
            self._partial, self._partial_size, self._skipping = [], 0, True

    def _decode(self, line: bytes) -> dict[str, Any] | None:
        stripped = line.strip()
        if not stripped:
            return None
        if stripped[:1] == b"{":
            try:
                message = orjson.loads(stripped)
            except ValueError:  # strict JSON failed: what Python's json accepts (NaN...)
                try:
                    message = json.loads(stripped)
                except ValueError:
                    message = None
            if isinstance(message, dict):
                return message
        self.noise.add(line.rstrip(b"\r"))
        return None

    async def close(self) -> None:
        """Close the agent's stdin (it sees EOF and should exit)."""
        try:
            await self._process.stdin.aclose()
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass


__all__ = ["MAX_LINE_BYTES", "UPDATES_PER_STEP", "ProcessTransport", "StdoutNoise"]


def _is_update_notification(message: dict[str, Any]) -> bool:
    return message.get("method") == "session/update" and "id" not in message
