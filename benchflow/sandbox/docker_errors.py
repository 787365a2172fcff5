"""Which Docker SDK failures are transient: decided from exception types and HTTP status.

A daemon 5xx, a lost or refused connection and a timeout may pass on a second try; a
4xx (an image that does not exist, a bad request, a name conflict) would fail the same
way again. `sandbox/docker.py::map_docker_errors` and the image pull use this to set
`SandboxError.transient`, which is all the job layer's retries read.
"""

from __future__ import annotations

import docker.errors
import requests.exceptions
import urllib3.exceptions

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


__all__ = ["is_transient"]
