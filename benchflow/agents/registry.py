"""Resolve an agent name to the driver that runs it.

Built-in agents (`oracle`, `nop`, `model`) first, then `acpx/<agent>` (a manifest agent
routed through ACPX), then the catalog (`catalog.py`): ACP manifests by name or alias, and
driver factories registered as `benchflow.agents` entry points.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from benchflow.agents.acp_driver import AcpAgentDriver
from benchflow.agents.agent_env import AgentEndpoint, resolve_credentials
from benchflow.agents.base import AgentDriver
from benchflow.agents.builtin import BUILTIN_AGENT_NAMES, NopAgent, OracleAgent
from benchflow.config import Scene
from benchflow.errors import ConfigError
from benchflow.task import Task

if TYPE_CHECKING:  # the catalog (manifests, entry points) loads for registered agents only
    from benchflow.agents.catalog import AgentCatalog

ACPX_PREFIX = "acpx/"
"""An agent name `acpx/<agent>` routes a manifest agent through ACPX (`acpx_driver`)."""


def _model_agent() -> AgentDriver:
    from benchflow.agents.model_agent import ModelAgent  # its tools load only for it

    return ModelAgent()


BUILTIN_AGENTS: dict[str, Callable[[], AgentDriver]] = {
    OracleAgent.name: OracleAgent, NopAgent.name: NopAgent, "model": _model_agent}
# the names a command agent may not take are these; `model` is built in but takes a model
assert set(BUILTIN_AGENT_NAMES) <= set(BUILTIN_AGENTS)


TRUSTED_AGENTS = frozenset({"oracle", "nop"})
"""Agents that cannot game a verifier (the oracle is the reference; nop does nothing)."""


def known_agents() -> list[str]:
    """Every agent name `get_driver` accepts (aliases not included)."""
    from benchflow.agents.catalog import load_catalog

    return sorted({*BUILTIN_AGENTS, *load_catalog().names()})


def lookup_agent(name: str) -> tuple[AgentCatalog, str]:
    """The catalog and the canonical name of `name` (a manifest name or alias, or an entry
    point; not a built-in).

    Raises:
        ConfigError: unknown agent; the message lists every known agent.
    """
    from benchflow.agents.catalog import load_catalog

    catalog = load_catalog()
    canonical = catalog.resolve(name)
    if canonical is None:
        raise ConfigError(catalog.unknown_message(name, extra=list(BUILTIN_AGENTS)))
    return catalog, canonical


def get_driver(name: str) -> AgentDriver:
    """The driver for `name` (a built-in, a manifest name or alias, or an entry point).

    Raises:
        ConfigError: unknown agent; the message lists every known agent.
    """
    if name in BUILTIN_AGENTS:
        return BUILTIN_AGENTS[name]()
    if name.startswith(ACPX_PREFIX):
        from benchflow.agents.acpx_driver import AcpxDriver  # ACP machinery only when routed

        inner = _acp_driver(name.removeprefix(ACPX_PREFIX), routed=name)
        return AcpxDriver(inner, name=ACPX_PREFIX + inner.name)
    catalog, canonical = lookup_agent(name)
    if canonical in catalog.factories:
        driver: AgentDriver = catalog.factories[canonical]()
        return driver
    return AcpAgentDriver(catalog.manifest(canonical))


def _acp_driver(name: str, *, routed: str) -> AcpAgentDriver:
    """The manifest agent `acpx/<name>` routes (only ACP manifest agents can be routed)."""
    driver = get_driver(name)
    if not isinstance(driver, AcpAgentDriver):
        raise ConfigError(f"agent {routed!r}: ACPX routes registered ACP agents (claude, codex, "
                          f"gemini, opencode, scripted, ...); {name!r} is not one")
    return driver


def check_credentials(agent_name: str, model: str | None = None,
                      env: Mapping[str, str] | None = None,
                      endpoint: AgentEndpoint | None = None) -> None:
    """Fail before any container starts when `agent_name` cannot authenticate for `model`.

    Looks in `env` (the role's env), benchflow's provider key (the role's `endpoint`, the
    host's) and the host environment.
    Built-in agents and entry-point drivers need nothing here.

    Raises:
        ConfigError: unknown agent, or a missing credential; the message names the
            environment variables to set.
    """
    if agent_name in BUILTIN_AGENTS:
        return
    if agent_name.startswith(ACPX_PREFIX):
        agent_name = _acp_driver(agent_name.removeprefix(ACPX_PREFIX), routed=agent_name).name
    catalog, canonical = lookup_agent(agent_name)
    if canonical in catalog.factories:
        return
    resolve_credentials(catalog.manifest(canonical), model, env or {}, endpoint)


def check_task(task: Task, agents: Iterable[str]) -> None:
    """What the task must hold for `agents`, checked before any container starts.

    Raises:
        TaskInvalidError: the oracle is asked for and the task has no solution.
    """
    if "oracle" in agents:
        OracleAgent.check_task(task)


def check_scenes(scenes: Sequence[Scene], given: Container[str] = (),
                 endpoint: AgentEndpoint | None = None) -> None:
    """Every role of `scenes` names a known agent whose credentials are present (its own,
    or the model `endpoint`'s key for its role).

    Agents in `given` (drivers a job supplies, such as command agents) are taken as they are.

    Raises:
        ConfigError: the first unknown agent or missing credential.
    """
    for scene in scenes:
        for role in scene.roles:
            if role.agent not in given:
                get_driver(role.agent)
                check_credentials(role.agent, role.model, role.env,
                                  endpoint.for_role(role.name) if endpoint else None)


__all__ = ["BUILTIN_AGENTS", "TRUSTED_AGENTS", "check_credentials", "check_scenes", "check_task",
           "get_driver", "known_agents", "lookup_agent"]
