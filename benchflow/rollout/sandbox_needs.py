"""What a rollout asks of its sandbox backend, checked before anything starts."""

from __future__ import annotations

from collections.abc import Mapping

from benchflow.agents.acp_driver import AcpAgentDriver
from benchflow.agents.base import AgentDriver
from benchflow.agents.registry import get_driver
from benchflow.config import RolloutConfig
from benchflow.sandbox.provider import SandboxNeeds
from benchflow.sandbox.registry import provider_class
from benchflow.sandbox.spec import NetworkPolicy
from benchflow.task import Task


def sandbox_needs(config: RolloutConfig, task: Task, policy: NetworkPolicy,
                  drivers: Mapping[str, AgentDriver] | None = None) -> SandboxNeeds:
    """The capabilities this rollout needs: live processes for ACP agents, another user
    for the task's agent user, the network policy, GPUs."""
    given = dict(drivers or {})
    agents = {role.agent for scene in config.scenes for role in scene.roles}
    live = any(isinstance(given.get(name) or get_driver(name), AcpAgentDriver) for name in agents)
    return SandboxNeeds(live_processes=live, other_user=task.config.agent.user is not None,
                        network_policy=policy, gpus=task.config.sandbox.gpus,
                        compose=task.compose_file is not None)


def require_sandbox(config: RolloutConfig, task: Task, policy: NetworkPolicy,
                    drivers: Mapping[str, AgentDriver] | None = None) -> None:
    """Raise `CapabilityError` (a ConfigError) when `config.environment` lacks a capability.

    Raises:
        CapabilityError: naming the backend, the capability and what to do.
        ConfigError: the backend is unknown or its SDK is missing.
    """
    provider_class(config.environment)(config.provider_config).require(
        sandbox_needs(config, task, policy, drivers))


__all__ = ["require_sandbox", "sandbox_needs"]
