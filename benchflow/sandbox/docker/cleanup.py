"""Remove what crashed runs left: containers labelled by benchflow, then its networks.

Only leftovers: each container's lease (`owner.CleanupScope.skip_reason`) is checked
before it is removed, so a live job of another benchflow process is never touched.
"""

from __future__ import annotations

import docker.errors

from benchflow.errors import SandboxTeardownError
from benchflow.sandbox.docker.errors import docker_call, docker_client
from benchflow.sandbox.labels import LABEL_JOB, LABEL_MANAGED
from benchflow.sandbox.owner import LABEL_JOB_ID, CleanupReport, CleanupScope


def _scope(scope: CleanupScope | str | None) -> CleanupScope:
    """A scope from a job name (the older call form) or None (everything benchflow's)."""
    if isinstance(scope, CleanupScope):
        return scope
    return CleanupScope(job_name=scope)


def _candidates(scope: CleanupScope) -> list[dict]:
    """The containers the scope may hold, listed with the daemon's own label filters (one
    request each, no inspect per container: a shared daemon may hold hundreds)."""
    api = docker_client().api
    managed = f"{LABEL_MANAGED}=true"
    queries = []
    if scope.job_id is not None:
        queries.append([managed, f"{LABEL_JOB_ID}={scope.job_id}"])
    if scope.job_name is not None:  # also what older versions made (no job id)
        queries.append([managed, f"{LABEL_JOB}={scope.job_name}"])
    if not queries:
        queries.append([managed])
    found: dict[str, dict] = {}
    for labels in queries:
        for info in api.containers(all=True, filters={"label": labels}):
            found.setdefault(info["Id"], info)
    return list(found.values())


def sweep_containers_now(scope: CleanupScope) -> CleanupReport:
    """Blocking: remove the leftover containers in `scope`; say which were kept and why."""
    api = docker_client().api
    report = CleanupReport()
    for info in _candidates(scope):
        labels = info.get("Labels") or {}
        name = (info.get("Names") or [info["Id"][:12]])[0].lstrip("/")
        if not scope.matches(labels):
            continue
        reason = scope.skip_reason(labels)
        if reason is not None:
            report.skipped.append((name, reason))
            continue
        try:
            api.remove_container(info["Id"], force=True, v=True)
        except docker.errors.NotFound:
            continue  # gone meanwhile
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: its removal is already under way
                report.skipped.append((name, f"could not remove: {exc.explanation or exc}"))
                continue
        report.removed.append(name)
    return report


async def sweep_containers(scope: CleanupScope | str | None = None) -> CleanupReport:
    """Remove the leftover containers in `scope` (see `sweep_containers_now`)."""
    return await docker_call(sweep_containers_now, _scope(scope), error=SandboxTeardownError)


__all__ = ["sweep_containers", "sweep_containers_now"]
