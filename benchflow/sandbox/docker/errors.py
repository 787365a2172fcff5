"""The Docker SDK boundary: one client, calls in worker threads, failures mapped once.

Which failures are transient is decided from exception types and HTTP status: a daemon
5xx, a lost or refused connection and a timeout may pass on a second try; a 4xx (an image
that does not exist, a bad request, a name conflict) would fail the same way again.
`map_docker_errors` and the image pull use this to set `SandboxError.transient`, which is
all the job layer's retries read.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import anyio
import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from benchflow.errors import BenchflowError, SandboxError, SandboxExecError, SandboxStartError

T = TypeVar("T")
_docker_limiter = anyio.CapacityLimiter(32)

_TRANSPORT = (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
              urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)


def is_transient(exc: BaseException) -> bool:
    """Whether the Docker failure `exc` may not repeat (5xx, connection, timeout)."""
    if isinstance(exc, docker.errors.APIError):
        status = exc.status_code
        if status is not None:
            return status >= 500
        # no response: the request never got an answer from the daemon
        return isinstance(exc, _TRANSPORT)
    if isinstance(exc, _TRANSPORT):
        return True
    return False


@contextlib.contextmanager
def map_docker_errors(error: type[SandboxError] = SandboxExecError) -> Iterator[None]:
    """Translate Docker SDK and transport failures into `error` (a SandboxError).

    `transient` (what retries read) comes from the exception's type and HTTP status:
    see `is_transient`.
    """
    try:
        yield
    except BenchflowError:
        raise
    except docker.errors.APIError as exc:
        raise error(f"docker API error: {exc.explanation or exc}",
                    transient=is_transient(exc)) from exc
    except docker.errors.DockerException as exc:
        raise error(f"docker error: {exc}", transient=is_transient(exc)) from exc
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as exc:
        raise error(f"lost connection to the docker daemon: {exc}", transient=True) from exc


@functools.cache
def docker_client() -> docker.DockerClient:
    """The process-wide Docker client (one connection pool for every sandbox)."""
    with map_docker_errors(SandboxStartError):
        return docker.from_env(max_pool_size=64)


async def docker_call(fn: Callable[..., T], *args: Any, error: type[SandboxError] = SandboxExecError,
                **kwargs: Any) -> T:
    with map_docker_errors(error):
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs),
                                              limiter=_docker_limiter)


__all__ = ["docker_call", "docker_client", "is_transient", "map_docker_errors"]
