"""`environment.provider_config` for the daytona backend."""

from __future__ import annotations

from benchflow._models import FrozenModel


class DaytonaConfig(FrozenModel):
    """`environment.provider_config` for daytona."""

    client_factory: str | None = None
    """`module:callable` returning an `AsyncDaytona`-compatible client (default: the SDK's)."""
    auto_stop_interval: int = 60
    """Minutes of inactivity before Daytona stops a sandbox benchflow lost track of."""
    auto_delete_interval: int = 0
    """Minutes after a stop before Daytona deletes it (0: at once)."""
    create_timeout_sec: float = 300.0
    target: str | None = None
    max_sandboxes: int = 100
    """Sandboxes alive at once from this process, whatever the job's concurrency."""
    creates_per_sec: float = 5.0
    rate_limit_retries: int = 5
    """Creates answered 429 are retried this many times, with exponential backoff."""
    backoff_sec: float = 1.0
    price_per_cpu_hour: float = 0.0504
    """USD per vCPU hour (Daytona's published rate): `cost` in result.json."""
    price_per_gib_hour: float = 0.0162
    """USD per GiB of memory per hour."""
    price_per_disk_gib_hour: float = 0.000108
    """USD per GiB of disk per hour."""
    stream_retries: int = 3
    """A live process's log stream that ends before the command did is re-opened this
    many times (Daytona replays the log from the start; what was delivered is skipped)."""


__all__ = ["DaytonaConfig"]
