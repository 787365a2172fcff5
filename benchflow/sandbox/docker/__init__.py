"""The docker backend: sandboxes as containers on the local (or `DOCKER_HOST`) daemon.

| module | what it holds |
| --- | --- |
| `errors.py` | the Docker SDK boundary: one client, calls in worker threads, failures mapped |
| `engine.py` | a plain rollout's requests over the local socket, without the SDK (`http.client`) |
| `sandbox.py` | `DockerSandbox`: start, exec, files, live processes, snapshots, policy |
| `process.py` | a live process over the daemon's exec socket |
| `images.py` | task image builds and pulls |
| `volumes.py` | named volumes (the agents' install layers) |
| `compose.py`, `compose_mounts.py` | multi-container tasks (`docker compose`) |
| `cleanup.py` | leftover containers of crashed runs, by label |
| `provider.py` | `DockerProvider`, the `docker` entry of the sandbox registry |

Nothing outside `benchflow/sandbox/` imports these modules: rollouts ask a provider's
capabilities. Names are loaded on first use, for tests and labs.
"""

from importlib import import_module as _import_module

_EXPORTS = {
    "CAPABILITIES": "sandbox", "DockerSandbox": "sandbox", "LABEL_JOB": "sandbox",
    "LABEL_MANAGED": "sandbox", "LABEL_ROLLOUT": "sandbox", "LABEL_SNAPSHOT_OF": "sandbox",
    "preflight": "sandbox", "DockerProvider": "provider",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'benchflow.sandbox.docker' has no attribute {name!r}")
    return getattr(_import_module(f"benchflow.sandbox.docker.{module}"), name)


__all__ = sorted(_EXPORTS)
