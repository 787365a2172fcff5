"""The one boundary where the openai SDK's exceptions become benchflow's `ProviderError`.

Transient (retried): timeouts, connection failures, 408, 409, 429 and every 5xx. Anything
else (bad request, authentication, permission, not found, unprocessable, a response that
does not validate) is final. Messages never carry the API key: the SDK's messages hold the
status and the provider's error body only.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from benchflow.errors import ProviderError

TRANSIENT_STATUSES = frozenset({408, 409, 429})
"""Statuses worth retrying besides every 5xx."""


def is_transient_status(status: int | None) -> bool:
    return status is not None and (status in TRANSIENT_STATUSES or status >= 500)


def to_provider_error(exc: BaseException) -> ProviderError:
    """The `ProviderError` for any exception the openai SDK raises."""
    import openai

    name = type(exc).__name__
    detail = str(exc) if exc.args else name
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError(f"model API timed out: {detail}", transient=True)
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError(f"model API unreachable: {detail}", transient=True)
    if isinstance(exc, openai.APIStatusError):
        status = getattr(exc, "status_code", None)
        return ProviderError(f"model API answered {status} ({name}): {detail}", status=status,
                             transient=is_transient_status(status))
    return ProviderError(f"model API call failed ({name}): {detail}")


@contextmanager
def map_openai_errors() -> Iterator[None]:
    """Re-raise every openai SDK exception as a `ProviderError` (`raise ... from exc`)."""
    import openai

    try:
        yield
    except openai.OpenAIError as exc:
        raise to_provider_error(exc) from exc


__all__ = ["TRANSIENT_STATUSES", "is_transient_status", "map_openai_errors", "to_provider_error"]
