"""Which trial errors the job retries, and how long it waits in between.

Only transient infrastructure failures are retried: an error recorded with
`retryable: true`, which a `SandboxError` gets when the backend's failure may pass on
a second try (a daemon 5xx, a lost connection, a timeout; see
`sandbox/docker/errors.py`), or a `ProviderError` marked transient. A Dockerfile that
does not build, an image that does not exist, an agent or verifier outcome, a
teardown error and a cancellation are never retried.

`max_attempts` is the number of retries after the first try, as the job spec says:
the default 3 gives up to 4 tries, 0 turns retries off.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchflow.job.config import RetryConfig
from benchflow.rollout.result import RolloutResult

@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: `initial_delay * multiplier**(n-1)` before retry n, capped."""

    max_attempts: int = 3
    initial_delay_sec: float = 1.0
    max_delay_sec: float = 30.0
    multiplier: float = 2.0

    @classmethod
    def from_config(cls, config: RetryConfig) -> RetryPolicy:
        return cls(max_attempts=config.max_attempts,
                   initial_delay_sec=config.initial_delay_ms / 1000,
                   max_delay_sec=config.max_delay_ms / 1000, multiplier=config.multiplier)

    @staticmethod
    def is_retryable(result: RolloutResult) -> bool:
        """Whether the result's error is a transient infrastructure failure (its exception
        class decided, `errors.py`: never a teardown error nor a cancellation)."""
        return result.error is not None and result.error.retryable

    def should_retry(self, result: RolloutResult, attempt: int) -> bool:
        """Whether to run the trial again after its `attempt`-th (1-based) try ended so."""
        return attempt <= self.max_attempts and self.is_retryable(result)

    def delay_sec(self, attempt: int) -> float:
        """The wait after the `attempt`-th try failed (attempt >= 1)."""
        return min(self.initial_delay_sec * self.multiplier ** (attempt - 1), self.max_delay_sec)


NO_RETRY = RetryPolicy(max_attempts=0)

__all__ = ["NO_RETRY", "RetryPolicy"]
