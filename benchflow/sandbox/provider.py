"""The provider seam: one `SandboxProvider` per backend (docker, daytona, modal, yours).

A provider says what its sandboxes can do (`capabilities`), checks once per job that it can
work at all (`preflight`: credentials, daemon), makes sandboxes (`create`) and removes what
crashed or cancelled runs left behind (`cleanup`). Rollouts and jobs only talk to this
interface; nothing outside `benchflow/sandbox/` knows which backend runs.

Providers are registered by name (`benchflow.sandbox.registry`): the built-ins plus the
entry-point group `benchflow.sandboxes`, whose values point at a `SandboxProvider` subclass.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from benchflow._models import FrozenModel
from benchflow.errors import ConfigError
from benchflow.sandbox.base import Sandbox, SandboxCapabilities
from benchflow.sandbox.owner import CleanupReport, CleanupScope
from benchflow.sandbox.spec import NetworkPolicy, SandboxSpec


class CapabilityError(ConfigError):
    """A rollout needs something its sandbox backend cannot do (recorded as config_invalid)."""


@dataclass(frozen=True)
class SandboxNeeds:
    """What one rollout asks of its sandbox, derived before anything starts."""

    live_processes: bool = False
    """An ACP agent runs (a long-lived process with live stdio)."""
    other_user: bool = False
    """Commands run as a user other than the image's (an agent user, hardening)."""
    network_policy: NetworkPolicy = "public"
    gpus: int = 0
    compose: bool = False
    """The task has more services (an environment/docker-compose.yaml)."""


_FIXES = {
    "live_processes": "run ACP agents on a backend with live processes (docker), or use a "
                      "command/oracle agent",
    "root_exec": "drop the task's agent user and verifier hardening, or use docker",
    "gpus": "set gpus = 0 in the task, or choose a backend with GPUs",
}


class SandboxProvider(ABC):
    """One sandbox backend. Subclasses set `name` and `capabilities` and implement the rest.

    `provider_config` is the job file's `environment.provider_config` (backend-specific keys,
    validated by the provider).
    """

    name: ClassVar[str]
    capabilities: ClassVar[SandboxCapabilities]
    config_model: ClassVar[type[FrozenModel] | None] = None
    """The pydantic model of `provider_config` (job files are validated against it)."""
    early_start: ClassVar[bool] = False
    """Whether a sandbox may start on a thread's own event loop and then be used on another
    (`benchflow.sandbox.early`: `benchflow run` starts its first sandbox while it imports
    the rest)."""

    def __init__(self, provider_config: dict[str, Any] | None = None) -> None:
        self.provider_config = dict(provider_config or {})

    async def preflight(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Check once per job that sandboxes can be made (credentials, daemon reachability).

        Raises:
            ConfigError: something the user must set up first (one line saying what).
            SandboxStartError: the backend does not answer.
        """

    @abstractmethod
    def create(self, spec: SandboxSpec) -> Sandbox:
        """A sandbox for `spec`, not yet started (its `start()` prepares the image and starts it)."""

    @abstractmethod
    async def cleanup(self, job_name: str | None = None) -> list[str]:
        """Remove leftover sandboxes of `job_name` (or all benchflow's); returns what went."""

    async def cleanup_ids(self, sandbox_ids: list[str]) -> list[str]:
        """Delete sandboxes by id (those a job's ledger says were never deleted); returns the
        ids that were still there. Backends without a ledger return []."""
        return []

    async def cleanup_extras(self, job_name: str | None = None) -> list[str]:
        """Remove other leftovers (networks, firewall rules) after the sandboxes; returns names."""
        return []

    async def remove_snapshots(self, names: list[str]) -> list[str]:
        """Delete saved snapshots by name (a rollout's turn snapshots); returns those that
        existed. Backends without snapshots return []."""
        return []

    def cleanup_now(self, job_name: str) -> list[str]:
        """Blocking best-effort removal of a job's sandboxes while the process exits; never
        raises. Backends without a blocking path return [] (their ledger and labels let
        `benchflow sandbox cleanup` reclaim the rest)."""
        return []

    async def sweep(self, scope: CleanupScope) -> CleanupReport:
        """Remove the leftover sandboxes in `scope`, each one's owner lease checked first
        (`CleanupScope.skip_reason`), and report what was kept and why.

        The default serves backends that cannot read a sandbox's labels back: only a scope
        naming a job by name (or forced) removes anything, through `cleanup`.
        """
        if scope.job_name is not None or scope.force:
            return CleanupReport(removed=await self.cleanup(scope.job_name))
        return CleanupReport(skipped=[(f"{self.name} sandboxes", "this backend cannot check "
                                       "their owners: name a job (--job) or use --all --force")])

    async def sweep_extras(self, scope: CleanupScope) -> CleanupReport:
        """Other leftovers in `scope` (networks, firewall rules), after the sandboxes."""
        if scope.job_name is not None or scope.force:
            return CleanupReport(removed=await self.cleanup_extras(scope.job_name))
        return CleanupReport()

    async def reclaim(self) -> list[str]:
        """Remove the sandboxes whose deletion failed earlier in this process because the
        backend was unreachable (a daemon restart); returns them. The job calls it while it
        runs and as it ends. Raises SandboxError while the backend is still away."""
        return []

    def sweep_now(self, scope: CleanupScope) -> CleanupReport:
        """Blocking `sweep` while the process exits; never raises."""
        if scope.job_name is None:
            return CleanupReport()
        return CleanupReport(removed=self.cleanup_now(scope.job_name))

    def require(self, needs: SandboxNeeds) -> None:
        """Fail before anything starts when `needs` asks for a capability this backend lacks.

        Raises:
            CapabilityError: naming the backend, the capability and what to do.
        """
        caps = self.capabilities
        missing: list[tuple[str, str]] = []
        if needs.live_processes and not caps.live_processes:
            missing.append(("live processes (ACP agents)", _FIXES["live_processes"]))
        if needs.other_user and not caps.root_exec:
            missing.append(("exec as another user", _FIXES["root_exec"]))
        if needs.compose and not caps.compose:
            missing.append(("multi-container tasks (environment/docker-compose.yaml)",
                            "run this task with --env docker"))
        if needs.gpus and not caps.gpus:
            missing.append((f"GPUs ({needs.gpus} requested)", _FIXES["gpus"]))
        if needs.network_policy not in caps.network_policies:
            allowed = ", ".join(sorted(caps.network_policies))
            missing.append((f"network policy {needs.network_policy!r}",
                            f"use --network {allowed.split(', ')[0]} (supported here: {allowed}) "
                            "or a backend that enforces it"))
        if missing:
            what, fix = missing[0]
            raise CapabilityError(f"the {self.name} sandbox backend cannot provide {what}: {fix}")


__all__ = ["CapabilityError", "SandboxNeeds", "SandboxProvider"]
