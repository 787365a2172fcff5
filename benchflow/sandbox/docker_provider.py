"""The docker provider: sandboxes as containers on the local (or `DOCKER_HOST`) daemon."""

from __future__ import annotations

import logging

from benchflow._models import FrozenModel
from benchflow.errors import BenchflowError
from benchflow.sandbox.base import Sandbox
from benchflow.sandbox.docker import (
    CAPABILITIES,
    LABEL_JOB,
    LABEL_MANAGED,
    DockerSandbox,
    docker_client,
    preflight,
)
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.spec import SandboxSpec

log = logging.getLogger(__name__)


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

    async def preflight(self) -> None:
        await preflight()

    def create(self, spec: SandboxSpec) -> Sandbox:
        """A container for `spec`; `provider_config` keys (network, runtime, volumes) apply."""
        keys = {k: v for k, v in self.provider_config.items() if k in DockerProviderConfig.model_fields}
        spec = spec.model_copy(update=keys) if keys else spec
        if spec.compose_file is not None:  # a multi-container task
            from benchflow.sandbox.compose import ComposeSandbox

            return ComposeSandbox(spec)
        return DockerSandbox(spec)

    async def cleanup(self, job_name: str | None = None) -> list[str]:
        from benchflow.sandbox.cleanup import cleanup_containers

        return await cleanup_containers(job_name)

    async def cleanup_extras(self, job_name: str | None = None) -> list[str]:
        from benchflow.sandbox.compose import cleanup_compose_networks
        from benchflow.sandbox.network import cleanup_networks

        return [*await cleanup_compose_networks(job_name), *await cleanup_networks(job_name)]

    async def remove_snapshots(self, names: list[str]) -> list[str]:
        """Remove the images (turn snapshots) called `names`; missing ones are skipped."""
        from benchflow.sandbox.docker import docker_call

        client = docker_client()
        removed = []
        for name in names:
            try:
                await docker_call(client.images.remove, name, force=True)
            except BenchflowError as exc:
                if "No such image" not in str(exc) and "404" not in str(exc):
                    log.warning("could not remove snapshot %s: %s", name, exc)
                continue
            removed.append(name)
        return removed

    def cleanup_now(self, job_name: str) -> list[str]:
        try:
            client = docker_client()
            filters = {"label": [f"{LABEL_MANAGED}=true", f"{LABEL_JOB}={job_name}"]}
            containers = client.containers.list(all=True, filters=filters)
            for container in containers:
                try:
                    container.remove(force=True, v=True)
                except Exception:  # noqa: BLE001 - best effort: keep removing the others
                    log.warning("could not remove container %s", container.name)
            from benchflow.sandbox.compose import cleanup_compose_networks_now

            return [c.name for c in containers] + cleanup_compose_networks_now(job_name)
        except (BenchflowError, Exception) as exc:  # noqa: BLE001 - no daemon: nothing to remove
            log.warning("could not list containers of job %s: %s", job_name, exc)
            return []


__all__ = ["DockerProvider", "DockerProviderConfig"]
