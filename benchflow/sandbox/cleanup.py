"""Remove what crashed runs left: containers labelled by benchflow."""

from __future__ import annotations

from benchflow.sandbox.docker import LABEL_JOB, LABEL_MANAGED, _call, docker_client
from benchflow.errors import SandboxTeardownError


async def cleanup_containers(job_name: str | None = None) -> list[str]:
    """Force-remove benchflow's containers (of one job if `job_name`); returns their names."""
    client = docker_client()
    filters = {"label": [f"{LABEL_MANAGED}=true"] + ([f"{LABEL_JOB}={job_name}"] if job_name else [])}
    containers = await _call(client.containers.list, all=True, filters=filters,
                             error=SandboxTeardownError)
    for container in containers:
        await _call(container.remove, force=True, v=True, error=SandboxTeardownError)
    return [c.name for c in containers]
