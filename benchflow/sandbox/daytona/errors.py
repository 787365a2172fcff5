"""Daytona's exceptions mapped once, at the SDK boundary, onto benchflow's typed errors."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from benchflow.errors import BenchflowError, ConfigError, SandboxError, SandboxExecError


@contextlib.contextmanager
def map_daytona_errors(error: type[SandboxError] = SandboxExecError) -> Iterator[None]:
    """Translate Daytona SDK failures: rejected credentials or requests are configuration
    errors (never retried); everything else is `error` (infrastructure, retryable)."""
    import daytona

    deterministic = (daytona.DaytonaAuthenticationError, daytona.DaytonaAuthorizationError,
                     daytona.DaytonaForbiddenError, daytona.DaytonaBadRequestError,
                     daytona.DaytonaUnprocessableEntityError, daytona.DaytonaValidationError)
    try:
        yield
    except BenchflowError:
        raise
    except deterministic as exc:
        raise ConfigError(f"daytona rejected the request: {exc}") from exc
    except daytona.DaytonaError as exc:
        raise error(f"daytona error: {exc}", transient=True) from exc


__all__ = ["map_daytona_errors"]
