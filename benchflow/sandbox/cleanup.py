"""Remove what crashed runs left: containers labelled by benchflow, then its networks.

Only leftovers: each container's lease (`owner.CleanupScope.skip_reason`) is checked
before it is removed, so a live job of another benchflow process is never touched.
"""

from __future__ import annotations

from benchflow.errors import SandboxTeardownError
from benchflow.sandbox.docker import LABEL_MANAGED, docker_call, docker_client
from benchflow.sandbox.network import cleanup_networks, sweep_networks
from benchflow.sandbox.owner import CleanupReport, CleanupScope


def _scope(scope: CleanupScope | str | None) -> CleanupScope:
    """A scope from a job name (the older call form) or None (everything benchflow's)."""
    if isinstance(scope, CleanupScope):
        return scope
    return CleanupScope(job_name=scope)


def sweep_containers_now(scope: CleanupScope) -> CleanupReport:
    """Blocking: remove the leftover containers in `scope`; say which were kept and why."""
    client = docker_client()
    report = CleanupReport()
    for container in client.containers.list(all=True, filters={"label": f"{LABEL_MANAGED}=true"}):
        labels = container.labels or {}
        if not scope.matches(labels):
            continue
        reason = scope.skip_reason(labels)
        if reason is not None:
            report.skipped.append((container.name, reason))
            continue
        try:
            container.remove(force=True, v=True)
        except Exception as exc:  # noqa: BLE001 - gone meanwhile, or the daemon refused
            if "No such container" not in str(exc) and "404" not in str(exc):
                report.skipped.append((container.name, f"could not remove: {exc}"))
            continue
        report.removed.append(container.name)
    return report


async def sweep_containers(scope: CleanupScope | str | None = None) -> CleanupReport:
    """Remove the leftover containers in `scope` (see `sweep_containers_now`)."""
    return await docker_call(sweep_containers_now, _scope(scope), error=SandboxTeardownError)


async def cleanup_containers(scope: CleanupScope | str | None = None) -> list[str]:
    """Force-remove benchflow's leftover containers (of one job if named); their names."""
    return (await sweep_containers(scope)).removed


async def cleanup_all(scope: CleanupScope | str | None = None) -> tuple[list[str], list[str]]:
    """Containers first (a network in use cannot go), then the model-only networks and their
    host firewall chains; returns (container names, network names)."""
    containers = await cleanup_containers(scope)
    return containers, (await sweep_networks(_scope(scope))).removed


__all__ = ["cleanup_all", "cleanup_containers", "cleanup_networks", "sweep_containers",
           "sweep_containers_now"]
