"""Modal's exceptions, mapped once at the SDK boundary to benchflow's typed errors.

Deterministic failures (credentials, permissions, invalid requests, an image that does not
build) are never retried; transport, server and capacity failures (`ServiceError`,
`InternalError`, `ResourceExhaustedError`, timeouts, ...) are infrastructure and retryable.
`tests/unit/sandbox/test_modal_fake.py` checks that every class of `modal.exception` is mapped.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from benchflow.errors import (
    BenchflowError,
    ConfigError,
    SandboxBuildError,
    SandboxError,
    SandboxExecError,
)


def _classes(*names: str) -> tuple[type[BaseException], ...]:
    from modal import exception

    return tuple(getattr(exception, n) for n in names if hasattr(exception, n))


def rejected() -> tuple[type[BaseException], ...]:
    """Modal's answers that mean "fix your setup": never retried (`ConfigError`)."""
    return _classes("AuthError", "PermissionDeniedError", "VersionError", "UnimplementedError",
                    "RequestSizeError", "SerializationError", "DeserializationError",
                    "WorkspaceManagementError")


def permanent() -> tuple[type[BaseException], ...]:
    """Failures that would repeat identically: a `SandboxError` that is not transient."""
    return _classes("NotFoundError", "AlreadyExistsError", "SandboxTimeoutError",
                    "ExecTimeoutError", "SandboxFilesystemError", "ClientClosed")


def transient_classes() -> tuple[type[BaseException], ...]:
    """Modal's server, transport and capacity failures (what an ambiguous create raises)."""
    import grpclib

    return (*_classes("ServiceError", "InternalError", "InternalFailure", "ConnectionError",
                      "ResourceExhaustedError", "TimeoutError", "RemoteError", "ConflictError",
                      "DataLossError", "SandboxTerminatedError", "ExecutionError",
                      "SnapshotCreationError", "LogsFetchError"),
            grpclib.GRPCError, grpclib.exceptions.StreamTerminatedError)


@contextlib.contextmanager
def map_modal_errors(error: type[SandboxError] = SandboxExecError) -> Iterator[None]:
    """Translate Modal SDK failures raised inside the block (see the module docstring);
    `error` is the class for infrastructure failures (`SandboxStartError` while starting)."""
    from modal import exception

    try:
        yield
    except BenchflowError:
        raise
    except exception.ImageBuildError as exc:
        raise SandboxBuildError(f"modal could not build the image: {exc}") from exc
    except rejected() as exc:
        raise ConfigError(f"modal rejected the request: {exc}") from exc
    except exception.InvalidError as exc:
        if isinstance(exc, exception.ConflictError):
            raise error(f"modal error: {exc}", transient=True) from exc
        raise ConfigError(f"modal rejected the request: {exc}") from exc
    except permanent() as exc:
        raise error(f"modal error: {exc}") from exc
    except transient_classes() as exc:
        raise error(f"modal error: {exc}", transient=True) from exc
    except exception.Error as exc:  # a class newer than this mapping: infrastructure
        raise error(f"modal error: {exc}", transient=True) from exc


__all__ = ["map_modal_errors", "permanent", "rejected", "transient_classes"]
