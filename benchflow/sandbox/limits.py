"""Provider-level limits for cloud backends: sandboxes alive at once and creates per second.

They hold per backend and per process, whatever the job's concurrency (several jobs or
rollouts in one process share them), so a provider's rate limit (Modal: 5 creates/s by
default) and an account's quota are respected before the provider has to refuse.
"""

from __future__ import annotations

import anyio


class ProviderLimits:
    """A capacity limiter for live sandboxes plus a pacer spacing creates `1/rate` apart."""

    def __init__(self, max_sandboxes: int, creates_per_sec: float) -> None:
        self.alive = anyio.CapacityLimiter(max_sandboxes)
        self.interval = 1.0 / creates_per_sec if creates_per_sec > 0 else 0.0
        self._lock = anyio.Lock()
        self._last = float("-inf")

    async def pace(self) -> None:
        """Wait until the next create may start."""
        async with self._lock:
            wait = self._last + self.interval - anyio.current_time()
            if wait > 0:
                await anyio.sleep(wait)
            self._last = anyio.current_time()


_limits: dict[tuple[str, int, float], ProviderLimits] = {}


def limits_for(backend: str, max_sandboxes: int, creates_per_sec: float) -> ProviderLimits:
    """The process-wide limits of `backend` with these settings."""
    key = (backend, max_sandboxes, creates_per_sec)
    if key not in _limits:
        _limits[key] = ProviderLimits(max_sandboxes, creates_per_sec)
    return _limits[key]


__all__ = ["ProviderLimits", "limits_for"]
