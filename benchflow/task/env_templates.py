"""`${VAR}` and `${VAR:-default}` in a task's env tables, resolved from the host at run time.

Harbor's convention: `[environment.env]`, `[verifier.env]` and `[solution.env]` of a legacy
task.toml (and `sandbox.env`, `verifier.env`, `oracle.env` of a native task.md) may name host
variables instead of holding values. `resolve_task_env()` replaces them when a rollout starts
(the host's value, else the default; a variable set to the empty string counts as set, as
in Harbor); a variable that is not set and has no default is a `ConfigError` naming the
variable and the table, raised before anything starts. Values taken from the host are
secrets: the rollout masks them in its log and its error messages.

MCP servers get the same treatment in their `env` and `headers`: the task's
(`[[environment.mcp_servers]]`, `sandbox.mcp_servers`) in `resolve_task_env()`, a job's or
`--mcp-config`'s in `resolve_mcp_servers()`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from benchflow.errors import ConfigError
from benchflow.mcp import McpServer
from benchflow.settings import host_env
from benchflow.task.loader import Task

EnvLookup = Callable[[str], "str | None"]
"""Where values come from: `host_env` (the default), or a mapping's `.get` in tests."""

_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")

# normalized section -> (legacy table name, native table name)
_TABLES = {"sandbox": ("[environment.env]", "sandbox.env"),
           "verifier": ("[verifier.env]", "verifier.env"),
           "oracle": ("[solution.env]", "oracle.env")}


@dataclasses.dataclass(frozen=True)
class ResolvedTask:
    """A task with its env templates replaced, and the values that came from the host."""

    task: Task
    secrets: frozenset[str] = frozenset()


def _resolve(value: str, lookup: EnvLookup) -> tuple[str, list[str], list[str]]:
    """(text, missing variable names, values taken from the host)."""
    missing: list[str] = []
    taken: list[str] = []

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = lookup(name)
        if found is not None:
            taken.append(found)
            return found
        if default is not None:
            return default
        missing.append(name)
        return match.group(0)

    return _TEMPLATE.sub(sub, value), missing, taken


def resolve_mcp_servers(servers: list[McpServer], lookup: EnvLookup = host_env, *,
                        source: str = "mcp_servers") -> tuple[list[McpServer], frozenset[str]]:
    """A job's (or `--mcp-config`'s) MCP servers with env templates resolved: (servers, the
    values taken from the host).

    Raises:
        ConfigError: a variable is not set and has no default (naming `source`, the server
            and the key).
    """
    problems: list[str] = []
    secrets: set[str] = set()
    resolved = []
    for server in servers:
        fields: dict[str, dict[str, str]] = {}
        for field in ("env", "headers"):
            fields[field] = {}
            for key, value in getattr(server, field).items():
                fields[field][key], missing, taken = _resolve(value, lookup)
                problems.extend(f"{source} {server.name!r} {field} {key} = {value!r}: "
                                f"the host variable {name} is not set" for name in missing)
                secrets.update(v for v in taken if v)
        changed = fields["env"] != server.env or fields["headers"] != server.headers
        resolved.append(server.model_copy(update=fields) if changed else server)
    if problems:
        raise ConfigError("MCP server environment templates cannot be resolved:\n  "
                          + "\n  ".join(problems)
                          + "\nexport the variable(s) before running, or give a default "
                          "(${NAME:-value})")
    return resolved, frozenset(secrets)


def resolve_task_env(task: Task, lookup: EnvLookup = host_env) -> ResolvedTask:
    """The task with every env template resolved from the host: the tables above, a
    separate verifier's `[verifier.environment.env]`, each step's `[steps.verifier.env]`
    (and its `[steps.verifier.environment.env]`), as Harbor resolves them too, and the
    `env` and `headers` of the task's MCP servers.

    Raises:
        ConfigError: a variable is not set and has no default (each one is named, with the
            table and key that use it).
    """
    problems: list[str] = []
    secrets: set[str] = set()
    legacy = task.layout == "legacy"

    def resolve(env: dict[str, str], table: str) -> dict[str, str]:
        resolved = {}
        for key, value in env.items():
            resolved[key], missing, taken = _resolve(value, lookup)
            problems.extend(f"{table} {key} = {value!r}: the host variable {name} is not set"
                            for name in missing)
            secrets.update(v for v in taken if v)
        return resolved

    def with_env(settings: Any, table: str) -> Any:
        env = resolve(settings.env, table)
        return settings if env == settings.env else settings.model_copy(update={"env": env})

    def verifier_of(settings: Any, legacy_table: str, native_table: str, note: str = "") -> Any:
        """A verifier table and its `environment` table ("verifier", or "steps.verifier")."""
        out = with_env(settings, f"[{legacy_table}.env]{note}" if legacy
                       else f"{native_table}.env")
        if settings.environment is not None:
            environment = with_env(settings.environment,
                                   f"[{legacy_table}.environment.env]{note}" if legacy
                                   else f"{native_table}.environment.env")
            if environment is not settings.environment:
                out = out.model_copy(update={"environment": environment})
        return out

    def mcp_server(server: McpServer) -> McpServer:
        """An MCP server's `env` and `headers` values (API tokens, typically)."""
        table = (f"[[environment.mcp_servers]] {server.name!r}" if legacy
                 else f"sandbox.mcp_servers {server.name!r}")
        env = resolve(server.env, f"{table} env")
        headers = resolve(server.headers, f"{table} headers")
        if env == server.env and headers == server.headers:
            return server
        return server.model_copy(update={"env": env, "headers": headers})

    updates: dict[str, Any] = {}
    for section, names in _TABLES.items():
        settings = getattr(task.config, section)
        if section == "verifier":
            resolved = verifier_of(settings, "verifier", "verifier")
        else:
            resolved = with_env(settings, names[0] if legacy else names[1])
        if resolved is not settings:
            updates[section] = resolved
    sandbox = updates.get("sandbox", task.config.sandbox)
    servers = [mcp_server(server) for server in sandbox.mcp_servers]
    if servers != list(sandbox.mcp_servers):
        updates["sandbox"] = sandbox.model_copy(update={"mcp_servers": servers})
    steps = []
    for step in task.steps:
        verifier = verifier_of(step.config.verifier, "steps.verifier",
                               f"steps[{step.index}].verifier", f" (step {step.name!r})")
        config = (step.config if verifier is step.config.verifier
                  else step.config.model_copy(update={"verifier": verifier}))
        steps.append(step if config is step.config else dataclasses.replace(step, config=config))
    if problems:
        raise ConfigError(f"{task.config_file}: environment templates cannot be resolved:\n  "
                          + "\n  ".join(problems)
                          + "\nexport the variable(s) before running, or give a default "
                          "(${NAME:-value})")
    if steps != list(task.steps):
        updates["steps"] = [step.config for step in steps]
    if not updates:
        return ResolvedTask(task)
    config = task.config.model_copy(update=updates)
    return ResolvedTask(dataclasses.replace(task, config=config, steps=tuple(steps)),
                        frozenset(secrets))


__all__ = ["ResolvedTask", "resolve_mcp_servers", "resolve_task_env"]
