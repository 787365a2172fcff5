"""Which trial errors the job retries, and how long it waits in between.

Only infrastructure failures are retried: the error types of the exception classes
marked `retryable` (the sandbox errors: environment_* including Docker API failures
and a lost daemon connection, which `map_docker_errors` turns into sandbox errors).
An agent or verifier outcome is never retried, nor a teardown error (it leaves the
reward alone), nor a cancellation.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchflow.errors import BenchflowError, ErrorType
from benchflow.job.config import RetryConfig
from benchflow.rollout.result import RolloutResult

_NEVER: frozenset[str] = frozenset({"environment_teardown_failed", "cancelled"})


def _subclasses(cls: type[BenchflowError]) -> list[type[BenchflowError]]:
    out = [cls]
    for sub in cls.__subclasses__():
        out.extend(_subclasses(sub))
    return out


def retryable_error_types() -> frozenset[ErrorType]:
    """Error types recorded by a `retryable` exception class (read from the error tree)."""
    types = set()
    for cls in _subclasses(BenchflowError):
        flag = cls.__dict__.get("retryable", None)
        flag = flag if isinstance(flag, bool) else getattr(cls, "retryable", False)
        if flag is True:
            types.add(cls.error_type)
    return frozenset(types - _NEVER)  # type: ignore[arg-type]


RETRYABLE_ERROR_TYPES = retryable_error_types()


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
        """Whether the result's error is an infrastructure failure."""
        return result.error is not None and result.error.type in RETRYABLE_ERROR_TYPES

    def should_retry(self, result: RolloutResult, attempt: int) -> bool:
        """Whether to run the trial again after its `attempt`-th (1-based) try ended so."""
        return attempt < self.max_attempts and self.is_retryable(result)

    def delay_sec(self, attempt: int) -> float:
        """The wait after the `attempt`-th try failed (attempt >= 1)."""
        return min(self.initial_delay_sec * self.multiplier ** (attempt - 1), self.max_delay_sec)


NO_RETRY = RetryPolicy(max_attempts=1)

__all__ = ["NO_RETRY", "RETRYABLE_ERROR_TYPES", "RetryPolicy", "retryable_error_types"]
