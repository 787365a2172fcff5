"""The event loop a job runs on: asyncio, on uvloop where it is installed.

One process drives hundreds of rollouts, so the loop's own cost (scheduling callbacks,
timers, waking on I/O and on worker threads' results) is a good part of the work:
uvloop (libuv underneath) does it in C, which cut the event-loop lag p99 of 500
rollouts in flight by about a quarter in `labs/benchmarks/scale.py`. It is a
dependency on Linux and macOS; elsewhere, or when it is missing, the standard loop runs.
A job with one rollout in flight at a time (`benchflow run TASK`) leaves its loop little
to do and runs on the standard one, without importing uvloop (~3 ms of a whole-process run).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


def has_uvloop() -> bool:
    """Whether uvloop can be imported (checked without importing it)."""
    return importlib.util.find_spec("uvloop") is not None


def run_job_loop(func: Callable[[], Awaitable[T]], *, in_flight: int | None = None) -> T:
    """`anyio.run(func)` on asyncio, with uvloop when it is installed, unless at most one
    rollout runs at a time (`in_flight` 1; None: unknown, so possibly many)."""
    many = in_flight is None or in_flight > 1
    return anyio.run(func, backend="asyncio",
                     backend_options={"use_uvloop": many and has_uvloop()})


__all__ = ["has_uvloop", "run_job_loop"]
