"""Who plays which role: `--role NAME=AGENT[:MODEL]` and the job file's `roles:` mapping.

A task declares its roles and scenes (`agents:` / `scenes:` in task.md); a run assigns
agents (and models) to those roles without copying the task's prompts:

```python
roles = parse_role_options(["coder=claude:claude-sonnet-4-6", "reviewer=codex:gpt-5.4"])
scenes = assign_roles(task_scenes, roles, source="tasks/coder-reviewer")
```

`parse_agent_spec("codex:gpt-5.4")` reads one `AGENT[:MODEL]` (the model may itself hold
`:`, e.g. `qwen2.5:7b`). Every malformed value, and a role the scenes do not have, is a
`ConfigError` naming the value and the fix.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from benchflow._models import StrictModel
from benchflow.config import Scene
from benchflow.errors import ConfigError

ROLE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
AGENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$")
ROLE_OPTION_HELP = "--role NAME=AGENT[:MODEL], e.g. --role reviewer=codex:gpt-5.4"


class RoleIdentity(StrictModel):
    """Who plays a role: its agent and the model it uses (the agent's default when the run
    named none; None when unknown, e.g. the oracle)."""

    agent: str
    model: str | None = None


@dataclass(frozen=True)
class RoleAgent:
    """The agent (and model; None: the agent's default) assigned to a role."""

    agent: str
    model: str | None = None

    def __str__(self) -> str:
        return self.agent if self.model is None else f"{self.agent}:{self.model}"


def parse_agent_spec(text: str, *, where: str | None = None) -> RoleAgent:
    """`AGENT[:MODEL]` as a `RoleAgent`; `where` names the value in errors.

    Raises:
        ConfigError: an empty or malformed agent name, or an empty model.
    """
    where = where or f"agent {text!r}"
    agent, sep, model = text.strip().partition(":")
    if not AGENT_NAME.match(agent):
        raise ConfigError(f"{where}: {agent or '(empty)'!r} is not an agent name; write "
                          "AGENT[:MODEL], e.g. codex:gpt-5.4")
    if sep and not model.strip():
        raise ConfigError(f"{where}: the model after ':' is empty; write AGENT:MODEL, or "
                          "AGENT alone for its default model")
    return RoleAgent(agent, model.strip() or None)


def parse_role_option(text: str) -> tuple[str, RoleAgent]:
    """One `--role NAME=AGENT[:MODEL]` as (role name, its agent).

    Raises:
        ConfigError: no `=`, a bad role name, or a bad `AGENT[:MODEL]`.
    """
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep:
        raise ConfigError(f"--role {text!r}: expected NAME=AGENT[:MODEL], e.g. "
                          "--role reviewer=codex:gpt-5.4")
    if not ROLE_NAME.match(name):
        raise ConfigError(f"--role {text!r}: {name or '(empty)'!r} is not a role name (letters, "
                          "digits, '_', '.', '-'); " + ROLE_OPTION_HELP)
    return name, parse_agent_spec(spec, where=f"--role {text}")


def parse_role_options(values: Iterable[str]) -> dict[str, RoleAgent]:
    """Every `--role` given, by role name.

    Raises:
        ConfigError: a malformed value, or one role given twice.
    """
    roles: dict[str, RoleAgent] = {}
    for value in values:
        name, agent = parse_role_option(value)
        if name in roles:
            raise ConfigError(f"--role {name} given twice ({roles[name]} and {agent}): give "
                              "each role once")
        roles[name] = agent
    return roles


def parse_role_mapping(mapping: Mapping[str, str], *, where: str = "roles"
                       ) -> dict[str, RoleAgent]:
    """A job file's `roles: {coder: "claude:model", reviewer: codex}`.

    Raises:
        ConfigError: a bad role name or `AGENT[:MODEL]`.
    """
    out = {}
    for name, spec in mapping.items():
        if not ROLE_NAME.match(name):
            raise ConfigError(f"{where}: {name!r} is not a role name")
        out[name] = parse_agent_spec(str(spec), where=f"{where}.{name} {spec!r}")
    return out


def role_names(scenes: Sequence[Scene]) -> list[str]:
    """The role names of `scenes`, in order of first appearance."""
    return list(dict.fromkeys(role.name for scene in scenes for role in scene.roles))


def check_roles(assigned: Iterable[str], known: Sequence[str], *, source: str) -> None:
    """Every assigned role name is one of `known`.

    Raises:
        ConfigError: naming the unknown role, the task's roles and the fix.
    """
    for name in assigned:
        if name not in known:
            from benchflow._suggest import suggest

            near = suggest(name, list(known))
            hint = f" (did you mean {near!r}?)" if near else ""
            raise ConfigError(f"--role {name}: {source} has no role {name!r}{hint}; its roles "
                              f"are {', '.join(known) or '(none)'}")


def assign_roles(scenes: Sequence[Scene], roles: Mapping[str, RoleAgent], *,
                 source: str = "the task") -> list[Scene]:
    """`scenes` with each assigned role played by its agent (and model, when given; else the
    agent's default: a role's model from the task is dropped with its agent).

    Raises:
        ConfigError: a role the scenes do not have.
    """
    check_roles(roles, role_names(scenes), source=source)
    out = []
    for scene in scenes:
        updated = []
        for role in scene.roles:
            given = roles.get(role.name)
            if given is not None:
                model = given.model if given.model is not None else (
                    role.model if given.agent == role.agent else None)
                role = role.model_copy(update={"agent": given.agent, "model": model})
            updated.append(role)
        out.append(scene.model_copy(update={"roles": updated}))
    return out


__all__ = [
    "ROLE_OPTION_HELP",
    "RoleAgent",
    "RoleIdentity",
    "assign_roles",
    "check_roles",
    "parse_agent_spec",
    "parse_role_mapping",
    "parse_role_option",
    "parse_role_options",
    "role_names",
]
