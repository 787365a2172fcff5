"""What a cloud sandbox cost: its lifetime times its resources at the provider's rates.

Modal and Daytona bill sandboxes by the second for the CPU and memory they reserve (and
Daytona for disk); neither SDK returns a bill per sandbox, so a backend keeps a
`SandboxMeter` from create to delete and reports `cost_usd` at the rates in its
`provider_config` (defaults: the providers' published rates). The rollout adds it to the
model cost in result.json (`cost`; the sandbox's share is `sandbox_cost`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from benchflow.sandbox.base import Sandbox, implements


@dataclass(frozen=True)
class Rates:
    """USD per hour: per CPU core, per GiB of memory, per GiB of disk."""

    cpu_hour: float = 0.0
    gib_hour: float = 0.0
    disk_gib_hour: float = 0.0


@dataclass
class SandboxMeter:
    """Seconds a sandbox was alive (create to delete), priced at `rates`."""

    rates: Rates
    cpus: float
    memory_mb: int
    storage_mb: int = 0
    clock: Callable[[], float] = time.monotonic
    _started: float | None = field(default=None, repr=False)
    _seconds: float = field(default=0.0, repr=False)

    def start(self) -> None:
        if self._started is None:
            self._started = self.clock()

    def stop(self) -> None:
        if self._started is not None:
            self._seconds += self.clock() - self._started
            self._started = None

    @property
    def seconds(self) -> float:
        running = self.clock() - self._started if self._started is not None else 0.0
        return self._seconds + running

    @property
    def cost_usd(self) -> float | None:
        """The cost so far (None when the sandbox never started)."""
        if self._started is None and self._seconds == 0.0:
            return None
        hourly = (self.cpus * self.rates.cpu_hour + self.memory_mb / 1024 * self.rates.gib_hour
                  + self.storage_mb / 1024 * self.rates.disk_gib_hour)
        return round(self.seconds / 3600 * hourly, 8)


@runtime_checkable
class CostedSandbox(Sandbox, Protocol):
    """A sandbox whose provider bills it (`cost_usd`: USD so far, None if never started)."""

    @property
    def cost_usd(self) -> float | None: ...


def sandbox_cost(sandbox: Sandbox | None) -> float | None:
    """The provider's cost of `sandbox` when its backend reports one, else None."""
    return sandbox.cost_usd if implements(sandbox, CostedSandbox) else None


__all__ = ["CostedSandbox", "Rates", "SandboxMeter", "sandbox_cost"]
