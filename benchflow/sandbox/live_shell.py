"""A root shell kept open in a sandbox, for commands benchflow runs between turns.

Each `Sandbox.exec` costs a backend round trip or three (Docker: create, start, inspect:
~10-250 ms on a busy host); a shell started once with `open_process` runs a command in a
few milliseconds. Used where the cost sits on the critical path between two agents'
turns (the per-turn workspace scan). A command's stderr is discarded; its stdout comes
back whole. Any failure closes the shell: the caller falls back to `exec`.
"""

from __future__ import annotations

import logging
import secrets
import shlex
from collections.abc import Sequence

import anyio

from benchflow.errors import BenchflowError
from benchflow.sandbox.base import SYSTEM_PATH, ExecResult, LiveProcess, Sandbox

log = logging.getLogger(__name__)


class LiveShell:
    """`sh` as root in `sandbox`, started on first use. Not for concurrent use."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        self._process: LiveProcess | None = None
        self._broken = False

    @property
    def usable(self) -> bool:
        return not self._broken and self.sandbox.capabilities.live_processes

    async def run(self, argv: Sequence[str], *, timeout: float) -> ExecResult | None:
        """Run `argv` in the shell; its exit code and stdout, or None when the shell
        failed (it is then closed for good: use `exec`)."""
        if not self.usable:
            return None
        marker = secrets.token_hex(12).encode()
        line = (f"{shlex.join(argv)} 2>/dev/null </dev/null; "
                f"printf '\\n%s %s\\n' {marker.decode()} \"$?\"\n"
                ).encode("utf-8", "surrogateescape")  # file names that are not UTF-8
        try:
            if self._process is None:
                self._process = await self.sandbox.open_process(
                    ["/bin/sh"], user="root", env={"PATH": SYSTEM_PATH})
            with anyio.fail_after(timeout):
                await self._process.stdin.send(line)
                return await self._read(marker)
        except (BenchflowError, OSError, TimeoutError, anyio.BrokenResourceError,
                anyio.ClosedResourceError, anyio.EndOfStream) as exc:
            log.info("live shell unusable (%s): using exec", exc)
            await self.aclose()
            self._broken = True
            return None

    async def _read(self, marker: bytes) -> ExecResult:
        assert self._process is not None
        buffer = bytearray()
        tail = b"\n" + marker + b" "
        while True:
            start = buffer.find(tail)
            if start >= 0 and buffer.endswith(b"\n") and buffer.find(b"\n", start + 1) >= 0:
                end = buffer.find(b"\n", start + 1)
                code = buffer[start + len(tail):end].decode().strip()
                return ExecResult(int(code) if code.isdigit() else -1, bytes(buffer[:start]),
                                  b"")
            buffer.extend(await self._process.stdout.receive())

    async def aclose(self) -> None:
        """Stop the shell (idempotent, never raises)."""
        process, self._process = self._process, None
        if process is None:
            return
        with anyio.CancelScope(shield=True), anyio.move_on_after(10):
            try:
                await process.aclose()
            except Exception:  # noqa: BLE001 - going away either way
                log.debug("closing the live shell failed", exc_info=True)


__all__ = ["LiveShell"]
