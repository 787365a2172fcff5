"""Scenes declared in a task's frontmatter (`agents` and `scenes`).

```yaml
agents:                      # the roles; agent/model may be left to the run (-a/-m)
  coder: {}
  reviewer: {model: reviewer-model}
scenes:
  - name: review
    turns:
      - {role: coder}
      - {role: reviewer, prompt: "Review the workspace and write review.md."}
      - {role: coder, prompt: "Read review.md and revise."}
```

A turn naming an undeclared role is a load error. Without `scenes`, every declared role
takes one turn, in the declared order.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from benchflow._models import FrozenModel
from benchflow.config import Role, Scene, Turn
from benchflow.errors import ConfigError, TaskInvalidError
from benchflow.task._suggest import describe


class TaskRole(FrozenModel):
    """A role a task declares; unset fields come from the run's `-a`/`-m`."""

    agent: str | None = None
    model: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    timeout_sec: float | None = Field(default=None, gt=0)
    idle_timeout_sec: float | None = Field(default=None, gt=0)


class TaskTurn(FrozenModel):
    role: str
    prompt: str | None = None


class TaskScene(FrozenModel):
    name: str = "main"
    turns: list[TaskTurn] = Field(min_length=1)


class TaskScenes(FrozenModel):
    """The `agents` and `scenes` of a task.md frontmatter."""

    agents: dict[str, TaskRole] = Field(default_factory=dict)
    scenes: list[TaskScene] = Field(default_factory=list)

    def to_scenes(self, agent: str | None, model: str | None) -> list[Scene]:
        """Scenes with every role's agent and model resolved (the role's own, else the run's).

        Raises:
            ConfigError: a role has no agent and the run gave none.
        """
        scenes = []
        for scene in self.scenes:
            names = list(dict.fromkeys(t.role for t in scene.turns))
            roles = []
            for name in names:
                declared = self.agents.get(name, TaskRole())
                chosen = declared.agent or agent
                if chosen is None:
                    raise ConfigError(f"role {name!r} of scene {scene.name!r} names no agent: "
                                      "pass one with -a/--agent or set agents.<role>.agent")
                roles.append(Role(name=name, agent=chosen, model=declared.model or model,
                                  env=declared.env, timeout_sec=declared.timeout_sec,
                                  idle_timeout_sec=declared.idle_timeout_sec))
            scenes.append(Scene(name=scene.name, roles=roles,
                                turns=[Turn(role=t.role, prompt=t.prompt) for t in scene.turns]))
        return scenes


def parse_task_scenes(raw: dict[str, Any], label: str) -> TaskScenes | None:
    """Validate the reserved `agents`/`scenes` keys of a frontmatter (None if absent)."""
    if raw.get("agents") is None and raw.get("scenes") is None:
        return None
    data = {"agents": raw.get("agents") or {}, "scenes": raw.get("scenes") or []}
    try:
        spec = TaskScenes.model_validate(data)
    except ValidationError as exc:
        raise TaskInvalidError(f"{label}: {describe(exc, TaskScenes)}") from exc
    if not spec.scenes:
        if not spec.agents:
            return None
        spec = spec.model_copy(update={"scenes": [
            TaskScene(turns=[TaskTurn(role=name) for name in spec.agents])]})
    elif spec.agents:
        for scene in spec.scenes:
            for i, turn in enumerate(scene.turns):
                if turn.role not in spec.agents:
                    raise TaskInvalidError(
                        f"{label}: scenes[{scene.name}].turns[{i}] names role {turn.role!r}, "
                        f"which is not declared under 'agents' (declared: "
                        f"{', '.join(spec.agents)}); declare it or fix the turn")
    return spec
