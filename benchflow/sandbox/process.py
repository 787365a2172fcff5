"""What every backend's live process shares (`StreamedProcess`): docker's over the
daemon's exec socket (`docker/process.py`), Daytona's and Modal's over their SDKs."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Self

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream

from benchflow.errors import SandboxError

log = logging.getLogger(__name__)


class StreamedProcess:
    """What every backend's `LiveProcess` shares: its three streams, the exit code once
    known, `kill` through the backend's `killer` while it runs, `aclose` and `async with`
    (closing at the end). Subclasses set the attributes, implement `wait`, and release
    what else they hold in `_release`."""

    _stdin: ByteSendStream
    _stdout: ByteReceiveStream
    _stderr: ByteReceiveStream
    _returncode: int | None
    _killer: Callable[[], Awaitable[None]]
    _closed: bool = False

    @property
    def stdin(self) -> ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> ByteReceiveStream:
        return self._stderr

    @property
    def returncode(self) -> int | None:
        return self._returncode

    async def kill(self) -> None:
        if self._returncode is None:
            await self._killer()

    async def aclose(self) -> None:
        """Once, shielded from cancellation: kill the process while it runs (a sandbox
        already gone is logged, not raised), `_release` the backend's resources, then close
        stdout and stderr."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            try:
                await self.kill()
            except SandboxError as exc:  # the sandbox may be gone already
                log.info("could not kill %s: %s", type(self).__name__, exc)
            await self._release()
            await self._stdout.aclose()
            await self._stderr.aclose()

    async def _release(self) -> None:
        """What the backend holds besides the output streams (stdin, a session...)."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["StreamedProcess"]
