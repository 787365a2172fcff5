"""A fake clock for tests of timeouts: the event loop's time is real time plus jumps.

Every asyncio test runs on a `JumpClockLoop` (see `tests/conftest.py`). Until a test jumps,
it is an ordinary event loop. A test of a timeout sets the limit long (minutes, so real
time never reaches it on however loaded a machine), waits for the moment that matters (an
update arrived, a tool call is running: an event, not a duration), then `advance()`s the
clock past the limit: every deadline now due fires at the next turn of the loop. What
fired, and in which phase, is then the same on every run, whatever the machine's load.

benchflow reads time through `anyio.current_time()` (the running loop's `time()`), so
deadlines of `anyio.fail_after`/`move_on_after`, `anyio.sleep` and the ACP session's idle
and wall-clock checks all follow the jumps. Real processes (agents, shells) keep real
time: a jump makes benchflow's deadlines pass, never a subprocess's.

`elapse(seconds)` is for in-memory fakes of slow work ("this command takes 400 s"): it
jumps the clock by `seconds` and returns when the loop reaches that time, after every
deadline due earlier has fired. Jumps add up, so concurrent `elapse` calls each move the
clock (fakes that run in parallel hang instead, and tests cancel them on an event).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import anyio


class JumpClockLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose `time()` is the monotonic clock plus the jumps made so far."""

    def __init__(self) -> None:
        super().__init__()
        self.jumped = 0.0
        """Seconds added to the clock by `advance` (and `elapse`) so far."""

    def time(self) -> float:
        return super().time() + self.jumped

    def advance(self, seconds: float) -> None:
        """Move the clock forward; timers now due run at the loop's next iteration."""
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        self.jumped += seconds


def _loop() -> JumpClockLoop | None:
    loop = asyncio.get_running_loop()
    return loop if isinstance(loop, JumpClockLoop) else None


def advance(seconds: float) -> None:
    """Jump the running loop's clock forward by `seconds` (the loop must be a JumpClockLoop)."""
    loop = _loop()
    if loop is None:
        raise RuntimeError("advance() needs the JumpClockLoop (tests/conftest.py anyio_backend)")
    loop.advance(seconds)


async def elapse(seconds: float) -> None:
    """Let `seconds` pass at once: jump the clock and return at that time. On a loop that
    is not a JumpClockLoop (e.g. one a CLI command started), sleep for real."""
    loop = _loop()
    if loop is None or seconds <= 0:
        await anyio.sleep(seconds)
        return
    woken = loop.create_future()
    handle = loop.call_at(loop.time() + seconds, lambda: woken.done() or woken.set_result(None))
    loop.advance(seconds)
    try:
        await woken  # deadlines due before it fire first (a cancellation lands here)
    finally:
        handle.cancel()


async def wait_until(condition: Callable[[], object], what: str, *,
                     within_sec: float = 120.0) -> None:
    """Poll `condition` (state the code under test writes: files, counters) until it holds.

    `within_sec` is real time and only a guard against a hang, far beyond any load: the
    test states an order of events, not a duration.
    """
    give_up = time.monotonic() + within_sec
    while not condition():
        if time.monotonic() > give_up:
            raise AssertionError(f"never happened: {what}")
        await anyio.sleep(0.01)


__all__ = ["JumpClockLoop", "advance", "elapse", "wait_until"]
