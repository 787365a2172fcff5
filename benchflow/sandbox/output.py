"""Where a command's output goes as it arrives: to files whole, and a capped tail in memory.

An agent may print a gigabyte. `OutputCapture` takes the output chunk by chunk as the
backend reads it (linear time: no re-concatenation), appends each stream to its file
when one is given (so a killed or timed-out command's output is on disk up to its last
byte) and keeps only the last `memory_limit` bytes of each stream for the `ExecResult`
(error messages and trajectory events read the tail).
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

from benchflow.sandbox.base import ExecResult, Sandbox, StreamingSandbox, implements

STDOUT, STDERR = 1, 2
DEFAULT_MEMORY_LIMIT = 256 << 20
"""Per stream, what a plain `exec` keeps in memory (a command printing more keeps its tail)."""


class _Tail:
    """The last `limit` bytes written, in amortized linear time."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self.buf += data
        if len(self.buf) > 2 * self.limit:  # trim in large steps: each byte moves O(1) times
            del self.buf[:-self.limit]

    def value(self) -> bytes:
        return bytes(self.buf[-self.limit:]) if self.limit else b""


class OutputCapture:
    """One command's stdout and stderr: `files` get every byte as it arrives, memory keeps
    the last `memory_limit` bytes of each stream. Thread-safe enough for one writer (the
    backend's reader thread); `close()` flushes the files."""

    def __init__(self, stdout_path: Path | None = None, stderr_path: Path | None = None,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT) -> None:
        self.paths = {STDOUT: stdout_path, STDERR: stderr_path}
        self._files: dict[int, IO[bytes]] = {}
        self._tails = {STDOUT: _Tail(memory_limit), STDERR: _Tail(memory_limit)}
        try:
            for stream, path in self.paths.items():  # exist (empty) even when nothing is printed
                if path is not None:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    self._files[stream] = path.open("wb")
        except OSError:
            self.close()
            raise

    def write(self, stream: int, data: bytes) -> None:
        """Take one chunk of `stream` (STDOUT or STDERR)."""
        if not data:
            return
        self._tails[stream].add(data)
        handle = self._files.get(stream)
        if handle is not None:
            handle.write(data)

    def close(self) -> None:
        """Flush and close the files (idempotent). Each is closed even when flushing one
        fails (a full disk); the first such error is raised."""
        error: OSError | None = None
        for handle in self._files.values():
            try:
                handle.close()
            except OSError as exc:
                error = error or exc
                if not handle.closed:
                    handle.raw.close()  # type: ignore[attr-defined]
        if error is not None:
            raise error

    @property
    def truncated(self) -> bool:
        """Whether either stream printed more than memory keeps."""
        return any(t.total > len(t.value()) for t in self._tails.values())

    def total_bytes(self, stream: int) -> int:
        return self._tails[stream].total

    def result(self, exit_code: int, timed_out: bool = False) -> ExecResult:
        """The ExecResult of the command (each stream's tail kept in memory)."""
        return ExecResult(exit_code, self._tails[STDOUT].value(), self._tails[STDERR].value(),
                          timed_out)


async def exec_captured(sandbox: Sandbox, cmd: list[str], capture: OutputCapture, *,
                        user: str | None = None, cwd: str | None = None,
                        env: dict[str, str] | None = None,
                        timeout: float | None = None) -> ExecResult:
    """Run `cmd` with its output going to `capture` as it arrives, where the backend can
    stream it (`exec_into`); elsewhere the finished command's output is handed over whole.
    The capture's files are closed when this returns, whatever happened."""
    try:
        if implements(sandbox, StreamingSandbox):
            return await sandbox.exec_into(cmd, capture, user=user, cwd=cwd, env=env,
                                           timeout=timeout)
        result = await sandbox.exec(cmd, user=user, cwd=cwd, env=env, timeout=timeout)
        capture.write(STDOUT, result.stdout)
        capture.write(STDERR, result.stderr)
        return capture.result(result.exit_code, result.timed_out)
    finally:
        capture.close()


__all__ = ["DEFAULT_MEMORY_LIMIT", "STDERR", "STDOUT", "OutputCapture", "exec_captured"]
