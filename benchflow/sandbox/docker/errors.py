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
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from benchflow.errors import BenchflowError, SandboxError, SandboxExecError, SandboxStartError
from benchflow.sandbox.docker import engine

if TYPE_CHECKING:
    import docker

T = TypeVar("T")


class _Limiters(threading.local):
    """One limiter per thread, i.e. per event loop: an early start (`benchflow.sandbox.early`)
    runs on a loop of its own thread, and a limiter waited on from two loops can hang."""

    def __init__(self) -> None:
        self.docker = anyio.CapacityLimiter(32)


_limiters = _Limiters()

def _transport() -> tuple[type[BaseException], ...]:
    import requests.exceptions
    import urllib3.exceptions

    return (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
            urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)


def is_transient(exc: BaseException) -> bool:
    """Whether the Docker failure `exc` may not repeat (5xx, connection, timeout)."""
    import docker.errors

    if isinstance(exc, docker.errors.APIError):
        status = exc.status_code
        if status is not None:
            return status >= 500
        # no response: the request never got an answer from the daemon
        return isinstance(exc, _transport())
    return isinstance(exc, _transport())


@contextlib.contextmanager
def map_docker_errors(error: type[SandboxError] = SandboxExecError) -> Iterator[None]:
    """Translate Docker SDK and transport failures into `error` (a SandboxError).

    `transient` (what retries read) comes from the exception's type and HTTP status:
    see `is_transient`. The SDK is imported only when something failed (a start's first
    requests need none of it: `engine.py`).
    """
    try:
        yield
    except BenchflowError:
        raise
    except engine.Refused as exc:  # the SDK's words for a refusal
        raise error(f"docker API error: {exc.message}", transient=exc.status >= 500) from exc
    except engine.Unanswered as exc:
        raise error(f"lost connection to the docker daemon: {exc}", transient=True) from exc
    except Exception as exc:
        import docker.errors
        import requests.exceptions
        import urllib3.exceptions

        if isinstance(exc, docker.errors.APIError):
            raise error(f"docker API error: {exc.explanation or exc}",
                        transient=is_transient(exc)) from exc
        if isinstance(exc, docker.errors.DockerException):
            raise error(f"docker error: {exc}", transient=is_transient(exc)) from exc
        if isinstance(exc, (requests.exceptions.RequestException,
                            urllib3.exceptions.HTTPError)):
            raise error(f"lost connection to the docker daemon: {exc}",
                        transient=True) from exc
        raise


@functools.cache
def docker_client() -> docker.DockerClient:
    """The process-wide Docker client (one connection pool for every sandbox)."""
    import docker

    with map_docker_errors(SandboxStartError):
        return docker.from_env(max_pool_size=64)


async def docker_call(fn: Callable[..., T], *args: Any, error: type[SandboxError] = SandboxExecError,
                **kwargs: Any) -> T:
    with map_docker_errors(error):
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs),
                                              limiter=_limiters.docker)


class InFlight:
    """The requests under way that make or remove containers.

    The daemon finishes a request whose caller has exited: a create answered after a
    second Ctrl-C's sweep leaves a container nobody removes. A process exiting at once
    therefore `settle`s first (no create starts after it) and again after its sweep (the
    removals other threads began meanwhile are answered)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._count = 0
        self._closed = False

    @contextlib.contextmanager
    def request(self, *, creates: bool) -> Iterator[None]:
        """Around one blocking request; a create is refused once the process is exiting."""
        with self._changed:
            if creates and self._closed:
                raise SandboxStartError("the process is exiting: no sandbox starts now")
            self._count += 1
        try:
            yield
        finally:
            with self._changed:
                self._count -= 1
                self._changed.notify_all()

    def settle(self, timeout: float) -> bool:
        """Refuse creates from now on; wait (at most `timeout` s) until no request is under
        way. Returns whether none is."""
        with self._changed:
            self._closed = True
            return self._changed.wait_for(lambda: self._count == 0, timeout)


in_flight = InFlight()
"""This process's container creates and removals (see `InFlight`)."""


__all__ = ["InFlight", "docker_call", "docker_client", "in_flight", "is_transient",
           "map_docker_errors"]
