"""Remove what crashed runs left: containers labelled by benchflow, then its networks."""

from __future__ import annotations

from benchflow.errors import SandboxTeardownError
from benchflow.sandbox.docker import LABEL_JOB, LABEL_MANAGED, docker_call, docker_client
from benchflow.sandbox.network import cleanup_networks


async def cleanup_containers(job_name: str | None = None) -> list[str]:
    """Force-remove benchflow's containers (of one job if `job_name`); returns their names."""
    client = docker_client()
    filters = {"label": [f"{LABEL_MANAGED}=true"] + ([f"{LABEL_JOB}={job_name}"] if job_name else [])}
    containers = await docker_call(client.containers.list, all=True, filters=filters,
                             error=SandboxTeardownError)
    for container in containers:
        await docker_call(container.remove, force=True, v=True, error=SandboxTeardownError)
    return [c.name for c in containers]


async def cleanup_all(job_name: str | None = None) -> tuple[list[str], list[str]]:
    """Containers first (a network in use cannot go), then the model-only networks and their
    host firewall chains; returns (container names, network names)."""
    containers = await cleanup_containers(job_name)
    return containers, await cleanup_networks(job_name)


__all__ = ["cleanup_all", "cleanup_containers", "cleanup_networks"]
