"""A prompt's idle and wall-clock limits, watched by one loop timer instead of a task.

With hundreds of rollouts in flight, a watcher task per prompt (its coroutine, task
group, cancel scopes and events, all alive for the whole turn) is a large share of what
the garbage collector walks. `PromptWatch` is one timer handle, re-armed for the next
moment a limit could be reached (the idle limit moves with the agent's last activity, so
it is checked when it would fall due, not at every update). Only when a limit is reached
does it start a task, in the session's task group: the session's `react` (send
session/cancel, give the agent its grace to end the turn, kill it, stop the prompt).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from benchflow.acp.recorder import UpdateRecorder


class PromptWatch:
    """Watches one prompt for the idle limit (`idle_sec` without activity while no tool
    call runs) and the wall-clock `deadline` (loop time). `reason` becomes "idle" or
    "wall" when one is reached; `react(watch)` then runs in `tg` and returns whether
    session/cancel was sent (`cancel_sent`). The prompt runs inside `scope` (which
    `react` cancels to stop it) and calls `ended()` when it returns or raises."""

    __slots__ = ("_deadline", "_ended", "_ended_event", "_finished", "_handle", "_idle",
                 "_loop", "_react", "_reacted", "_rec", "_tg", "cancel_sent", "error",
                 "reason", "scope")

    def __init__(self, recorder: UpdateRecorder, idle_sec: float | None,
                 deadline: float | None, tg: TaskGroup,
                 react: Callable[[PromptWatch], Awaitable[bool]]) -> None:
        self._rec = recorder
        self._idle = idle_sec
        self._deadline = deadline
        self._tg = tg
        self._react = react
        self._ended = False
        self._ended_event: anyio.Event | None = None  # made only when someone waits
        self.scope = anyio.CancelScope()
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reacted = False
        self._finished: anyio.Event | None = None
        self.reason: str | None = None
        self.cancel_sent = False
        self.error: Exception | None = None
        """What `react()` raised (raised again by `stop()`)."""

    def start(self) -> None:
        """Arm the timer (nothing to arm when the prompt has no limit)."""
        if self._idle is None and self._deadline is None:
            return
        self._loop = asyncio.get_running_loop()
        self._check()

    @property
    def is_ended(self) -> bool:
        return self._ended

    def ended(self) -> None:
        """The prompt returned or raised."""
        self._ended = True
        if self._ended_event is not None:
            self._ended_event.set()

    async def wait_ended(self) -> None:
        if not self._ended:
            if self._ended_event is None:
                self._ended_event = anyio.Event()
            await self._ended_event.wait()

    def cancel(self) -> None:
        """Disarm the timer (the prompt ended or was cancelled)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    async def stop(self) -> str | None:
        """Disarm the timer; when a limit was reached, wait until `react()` is done.
        Returns the limit reached ("idle", "wall") or None; raises what `react()` raised."""
        self.cancel()
        if self.reason is not None and not self._reacted:
            self._finished = anyio.Event()
            await self._finished.wait()
        if self.error is not None:
            raise self.error
        return self.reason

    def _check(self) -> None:
        """The watcher's loop, one turn per timer: the same decisions, made when due."""
        self._handle = None
        if self._ended:
            return
        assert self._loop is not None
        now = self._loop.time()
        deadline, idle, rec = self._deadline, self._idle, self._rec
        if deadline is not None and now >= deadline:
            return self._fire("wall")
        wake = deadline if deadline is not None else math.inf  # idle is set then
        if idle is not None:
            if rec.busy:  # a running tool call is not idleness; look again soon
                wake = min(wake, now + min(idle, 1.0))
            elif now >= rec.last_activity + idle:
                return self._fire("idle")
            else:
                wake = min(wake, rec.last_activity + idle)
        self._handle = self._loop.call_at(max(wake, now + 0.001), self._check)

    def _fire(self, reason: str) -> None:
        self.reason = reason
        try:
            self._tg.start_soon(self._run_react, name="acp-prompt-timeout")
        except RuntimeError:  # the session is closing: the prompt is being cancelled
            self._reacted = True

    async def _run_react(self) -> None:
        try:
            self.cancel_sent = await self._react(self)
        except Exception as exc:  # noqa: BLE001 - raised by stop(), in the prompt's task
            self.error = exc
        finally:
            self._reacted = True
            if self._finished is not None:
                self._finished.set()


__all__ = ["PromptWatch"]
