"""`${VAR}` references in a job file's agent `env`, expanded from the host environment.

Expansion happens before anything starts; every variable that is not set is
reported at once, with the field that names it. Values made only of references
name secrets without holding them, so the saved config.json keeps them as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from benchflow.errors import ConfigError
from benchflow.job.config import JobConfig
from benchflow.settings import host_env

EnvLookup = Callable[[str], str | None]
"""Where `${VAR}` values come from: `host_env` (the default), or a mapping's `.get`."""

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str, lookup: EnvLookup) -> tuple[str, list[str]]:
    """Replace each `${VAR}` via `lookup(name) -> str | None`; returns (text, missing names)."""
    missing: list[str] = []

    def sub(match: re.Match[str]) -> str:
        found = lookup(match.group(1))
        if found is None:
            missing.append(match.group(1))
            return match.group(0)
        return found

    return _VAR.sub(sub, value), missing


def is_env_template(value: str) -> bool:
    """Whether a value holds only `${VAR}` references (so it names secrets, never holds one)."""
    return bool(_VAR.search(value)) and not _VAR.sub("", value).strip()


def expand_agent_env(config: JobConfig, lookup: EnvLookup = host_env,
                     source: Path | str = "job") -> dict[str, dict[str, str]]:
    """Each agent's `env` (an http agent's `headers`) with `${VAR}` replaced from the host.

    Raises:
        ConfigError: listing every variable that is not set, with its field.
    """
    expanded: dict[str, dict[str, str]] = {}
    problems: list[str] = []
    for index, agent in enumerate(config.agents):
        out = {}
        field, values = (("headers", agent.headers) if agent.kind == "http"
                         else ("env", {} if agent.kind == "builtin" else agent.env))
        for key, value in values.items():
            out[key], missing = expand_env(value, lookup)
            problems += [f"agents[{index}].{field}.{key}: ${{{name}}} is not set"
                         for name in missing]
        expanded[agent.name] = out
    if problems:
        raise ConfigError(f"{source}: environment variables missing: " + "; ".join(problems)
                          + ": export them before running the job, or remove those env entries")
    return expanded


__all__ = ["EnvLookup", "expand_agent_env", "expand_env", "is_env_template"]
