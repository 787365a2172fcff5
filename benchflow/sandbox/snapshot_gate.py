"""Orders a sandbox's snapshots against its other calls.

Docker pauses a container while it commits it (the default, `pause=True`, which gives a
snapshot taken at one instant). An exec created before the pause and started during it
joins the frozen cgroup and never signals that it started: the daemon then stops
answering for the container (inspect, unpause and remove hang) until its freezer cgroup
is thawed by hand. A rollout does run calls beside a snapshot: the session a role
closed after its last turn stops its agent in the background (waits, kill execs) while
the next turn's snapshot is taken. So every call that reaches into the sandbox (an exec,
a live process's start, an upload or download) passes the gate: a snapshot waits until
the calls in flight have returned, and calls made meanwhile wait until it is saved. A
snapshot is then also the sandbox between two of benchflow's calls, never mid-upload.

A live process already running is no call in flight: it is frozen and thawed with the
container. (Docker answers a live process's start before the process runs: the docker
backend waits for it to run before it commits, `docker.process.wait_started`.) Calls must
not nest (a call that waits for a snapshot while it holds the gate would wait for
itself): only a backend's innermost methods pass it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import TracebackType

import anyio


class SnapshotGate:
    """`async with gate:` around a call into the sandbox; `async with gate.snapshot():`
    around a snapshot. Calls run together; a snapshot runs alone."""

    __slots__ = ("_calls", "_idle", "_snapshot")

    def __init__(self) -> None:
        self._calls = 0
        self._idle: anyio.Event | None = None
        """Set when the last call in flight returns (exists while a snapshot waits)."""
        self._snapshot: anyio.Event | None = None
        """Set when the snapshot under way is saved (exists while one is)."""

    async def __aenter__(self) -> None:
        while self._snapshot is not None:
            await self._snapshot.wait()
        self._calls += 1

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        self._calls -= 1
        if self._calls == 0 and self._idle is not None:
            self._idle.set()

    @property
    def calls(self) -> int:
        """Calls in flight."""
        return self._calls

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[None]:
        """Hold the sandbox still: wait for the calls in flight (and an earlier snapshot);
        calls made until this exits wait."""
        while self._snapshot is not None:
            await self._snapshot.wait()
        saved = self._snapshot = anyio.Event()
        try:
            while self._calls:
                self._idle = anyio.Event()
                await self._idle.wait()
            self._idle = None
            yield
        finally:
            self._idle = self._snapshot = None
            saved.set()


__all__ = ["SnapshotGate"]
