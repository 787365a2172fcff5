"""The docker provider: sandboxes as containers on the local (or `DOCKER_HOST`) daemon."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from benchflow._models import FrozenModel
from benchflow.errors import SandboxError
from benchflow.sandbox.base import Sandbox
from benchflow.sandbox.docker.sandbox import CAPABILITIES, DockerSandbox, preflight
from benchflow.sandbox.owner import CleanupReport, CleanupScope
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.spec import SandboxSpec

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

SETTLE_SEC = 15.0
"""How long a process exiting at once waits for its container creates and removals under
way to be answered (each is one daemon request: well under a second when it answers)."""


def _remove_image(client: docker.DockerClient, name: str) -> bool:
    """Remove image `name`; False when there is none."""
    import docker.errors

    try:
        client.images.remove(name, force=True)
    except docker.errors.ImageNotFound:
        return False
    return True


class DockerProviderConfig(FrozenModel):
    """`environment.provider_config` for docker."""

    network: str | None = None
    runtime: str | None = None
    volumes: dict[str, dict[str, str]] | list[str] | None = None


class DockerProvider(SandboxProvider):
    """Containers with tini as PID 1, images built from the task's Dockerfile (the default)."""

    name = "docker"
    capabilities = CAPABILITIES
    config_model = DockerProviderConfig
    early_start = True  # nothing bound to one event loop (a limiter per thread, build locks)

    async def preflight(self) -> None:
        await preflight()

    def create(self, spec: SandboxSpec) -> Sandbox:
        """A container for `spec`; `provider_config` keys (network, runtime, volumes) apply."""
        keys = {k: v for k, v in self.provider_config.items() if k in DockerProviderConfig.model_fields}
        spec = spec.model_copy(update=keys) if keys else spec
        if spec.compose_file is not None:  # a multi-container task
            from benchflow.sandbox.docker.compose import ComposeSandbox

            return ComposeSandbox(spec)
        return DockerSandbox(spec)

    async def cleanup(self, job_name: str | None = None) -> list[str]:
        return (await self.sweep(CleanupScope(job_name=job_name))).removed

    async def cleanup_extras(self, job_name: str | None = None) -> list[str]:
        return (await self.sweep_extras(CleanupScope(job_name=job_name))).removed

    async def remove_snapshots(self, names: list[str]) -> list[str]:
        """Remove the images (turn snapshots) called `names`; missing ones are skipped."""
        from benchflow.sandbox.docker.errors import docker_call, docker_client

        removed = []
        for name in names:
            try:
                if await docker_call(_remove_image, docker_client(), name):
                    removed.append(name)
            except SandboxError as exc:
                log.warning("could not remove snapshot %s: %s", name, exc)
        return removed

    def cleanup_now(self, job_name: str) -> list[str]:
        return self.sweep_now(CleanupScope(job_name=job_name)).removed

    async def sweep(self, scope: CleanupScope) -> CleanupReport:
        from benchflow.sandbox.docker.cleanup import sweep_containers

        return await sweep_containers(scope)

    async def sweep_extras(self, scope: CleanupScope) -> CleanupReport:
        from benchflow.sandbox.docker.compose import cleanup_compose_networks
        from benchflow.sandbox.network import sweep_networks

        report = CleanupReport(removed=await cleanup_compose_networks(scope))
        report.extend(await sweep_networks(scope))
        return report

    async def reclaim(self) -> list[str]:
        from benchflow.sandbox.docker.sandbox import reclaim

        return await reclaim()

    def sweep_now(self, scope: CleanupScope) -> CleanupReport:
        from benchflow.sandbox.docker.cleanup import sweep_containers_now
        from benchflow.sandbox.docker.compose import cleanup_compose_networks_now
        from benchflow.sandbox.docker.errors import in_flight

        try:
            in_flight.settle(SETTLE_SEC)  # no create is answered after the sweep
            report = sweep_containers_now(scope)
            report.removed += cleanup_compose_networks_now(scope)
            in_flight.settle(SETTLE_SEC)  # nor a removal another task began meanwhile
            return report
        except Exception as exc:  # noqa: BLE001 - no daemon: nothing to remove
            log.warning("could not list containers of job %s: %s",
                        scope.job_id or scope.job_name, exc)
            return CleanupReport()


__all__ = ["DockerProvider", "DockerProviderConfig"]
