"""Scenes declared in a task's frontmatter (`agents` and `scenes`).

```yaml
agents:                      # the roles; agent/model may be left to the run (-a/-m)
  coder: {}
  reviewer: {model: reviewer-model, workspace: read-only, outputs: [review.md]}
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

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, ValidationError

from benchflow._models import FrozenModel
from benchflow.config import Role, Scene, Turn, WorkspacePaths
from benchflow.errors import ConfigError, TaskInvalidError
from benchflow import bounds as B
from benchflow._suggest import describe

if TYPE_CHECKING:
    from benchflow.roles import RoleAgent


class TaskRole(FrozenModel):
    """A role a task declares; unset fields come from the run's `-a`/`-m`."""

    agent: str | None = None
    model: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    timeout_sec: float | None = Field(default=None, gt=0, le=B.MAX_SECONDS, allow_inf_nan=False)
    idle_timeout_sec: float | None = Field(default=None, gt=0, le=B.MAX_SECONDS,
                                           allow_inf_nan=False)
    skills: list[Path] = Field(default_factory=list)
    """Skill folders for this role (relative paths: from the task folder)."""
    workspace: Literal["read-write", "read-only"] = "read-write"
    outputs: WorkspacePaths = Field(default_factory=list)
    """Workspace-relative files a read-only role may write (`Role.outputs`)."""
    session: Literal["persistent", "fresh"] = "persistent"


class TaskTurn(FrozenModel):
    role: str
    prompt: str | None = None
    session: Literal["fresh"] | None = None


class TaskScene(FrozenModel):
    name: str = "main"
    turns: list[TaskTurn] = Field(min_length=1)
    skills: list[Path] = Field(default_factory=list)
    """Skill folders for every role of the scene (relative paths: from the task folder)."""
    skills_out: str | None = Field(default=None, pattern=r"^/")
    """A sandbox folder whose skills, written during the scene, serve the later scenes."""


class TaskScenes(FrozenModel):
    """The `agents` and `scenes` of a task.md frontmatter."""

    agents: dict[str, TaskRole] = Field(default_factory=dict)
    scenes: list[TaskScene] = Field(default_factory=list)

    def role_names(self) -> list[str]:
        """The roles the task's scenes use, in order of first appearance."""
        return list(dict.fromkeys(t.role for scene in self.scenes for t in scene.turns))

    def to_scenes(self, agent: str | None, model: str | None,
                  assigned: "Mapping[str, RoleAgent] | None" = None) -> list[Scene]:
        """Scenes with every role's agent and model resolved: the run's assignment
        (`--role`), else the role's own, else the run's `-a`/`-m`.

        Raises:
            ConfigError: a role has no agent and the run gave none.
        """
        assigned = assigned or {}
        scenes = []
        for scene in self.scenes:
            names = list(dict.fromkeys(t.role for t in scene.turns))
            roles = []
            for name in names:
                declared = self.agents.get(name, TaskRole())
                given = assigned.get(name)
                chosen = given.agent if given else declared.agent or agent
                if chosen is None:
                    raise ConfigError(f"role {name!r} of scene {scene.name!r} names no agent: "
                                      f"pass one with --role {name}=AGENT[:MODEL] or -a/--agent, "
                                      "or set agents.<role>.agent")
                if given is not None:
                    chosen_model = given.model or (declared.model if declared.agent == given.agent
                                                   else None)
                else:
                    chosen_model = declared.model or model
                roles.append(Role(name=name, agent=chosen, model=chosen_model,
                                  env=declared.env, timeout_sec=declared.timeout_sec,
                                  idle_timeout_sec=declared.idle_timeout_sec,
                                  skills=declared.skills, workspace=declared.workspace,
                                  outputs=declared.outputs, session=declared.session))
            scenes.append(Scene(name=scene.name, roles=roles,
                                turns=[Turn(role=t.role, prompt=t.prompt, session=t.session)
                                       for t in scene.turns],
                                skills=scene.skills, skills_out=scene.skills_out))
        return scenes


def parse_task_scenes(raw: dict[str, Any], label: str,
                      folder: Path | None = None) -> TaskScenes | None:
    """Validate the reserved `agents`/`scenes` keys of a frontmatter (None if absent).

    Relative skill paths are resolved against `folder` (the task's)."""
    if raw.get("agents") is None and raw.get("scenes") is None:
        return None
    data = {"agents": raw.get("agents") or {}, "scenes": raw.get("scenes") or []}
    try:
        spec = TaskScenes.model_validate(data)
    except ValidationError as exc:
        raise TaskInvalidError(f"{label}: {describe(exc, TaskScenes)}") from exc
    if folder is not None:
        spec = _anchor_skills(spec, folder)
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


def _anchor_skills(spec: TaskScenes, folder: Path) -> TaskScenes:
    """Skill paths of roles and scenes made absolute from the task folder."""
    def anchor(paths: list[Path]) -> list[Path]:
        return [p if p.is_absolute() else folder / p for p in paths]

    agents = {name: role.model_copy(update={"skills": anchor(role.skills)})
              for name, role in spec.agents.items()}
    scenes = [scene.model_copy(update={"skills": anchor(scene.skills)}) for scene in spec.scenes]
    return spec.model_copy(update={"agents": agents, "scenes": scenes})
