"""Resolve an agent name to the driver that runs it."""

from __future__ import annotations

from benchflow.agents.base import AgentDriver
from benchflow.agents.builtin import NopAgent, OracleAgent
from benchflow.errors import ConfigError

BUILTIN_AGENTS: dict[str, type[AgentDriver]] = {"oracle": OracleAgent, "nop": NopAgent}


def known_agents() -> list[str]:
    return sorted(BUILTIN_AGENTS)


def get_driver(name: str) -> AgentDriver:
    """The driver for `name`. Raises ConfigError listing the known agents."""
    if name in BUILTIN_AGENTS:
        return BUILTIN_AGENTS[name]()
    raise ConfigError(f"unknown agent {name!r}; known agents: {', '.join(known_agents())}")
