"""The event loop a job runs on: asyncio, on uvloop where it is installed.

One process drives hundreds of rollouts, so the loop's own cost (scheduling callbacks,
timers, waking on I/O and on worker threads' results) is a good part of the work:
uvloop (libuv underneath) does it in C, which cut the event-loop lag p99 of 500
rollouts in flight by about a quarter in `labs/benchmarks/scale.py`. It is a
dependency on Linux and macOS; elsewhere, or when it is missing, the standard loop runs.
A job with one rollout in flight at a time (`benchflow run TASK`) leaves its loop little
to do and runs on the standard one, without importing uvloop (~3 ms of a whole-process run).

AnyIO asks which async library runs at every checkpoint, event, lock, cancel scope and
worker-thread trip (~175 times a rollout). Where sniffio is installed that answer is a
look-up of the current asyncio task each time (~1.5 us); during a job the loop's thread
answers it from sniffio's thread-local, as trio does for its own threads (~0.3 us).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

sniffio: Any
try:  # optional for AnyIO: without it, AnyIO asks asyncio directly (already cheap)
    import sniffio
except ImportError:  # pragma: no cover - installed with the project's dependencies
    sniffio = None

T = TypeVar("T")


def has_uvloop() -> bool:
    """Whether uvloop can be imported (checked without importing it)."""
    return importlib.util.find_spec("uvloop") is not None


def run_job_loop(func: Callable[[], Awaitable[T]], *, in_flight: int | None = None) -> T:
    """`anyio.run(func)` on asyncio, with uvloop when it is installed, unless at most one
    rollout runs at a time (`in_flight` 1; None: unknown, so possibly many)."""
    many = in_flight is None or in_flight > 1
    return anyio.run(_named_asyncio, func, backend="asyncio",
                     backend_options={"use_uvloop": many and has_uvloop()})


async def _named_asyncio(func: Callable[[], Awaitable[T]]) -> T:
    """`func()` with sniffio told, for this thread, that asyncio runs it (see the module
    docstring); what it said before is restored after."""
    if sniffio is None:
        return await func()
    local = sniffio.thread_local
    previous, local.name = local.name, "asyncio"
    try:
        return await func()
    finally:
        local.name = previous


__all__ = ["has_uvloop", "run_job_loop"]
