"""Desugaring: scenes of roles and turns become the flat list of steps the runtime runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from benchflow.config import Role, Scene


@dataclass(frozen=True)
class Step:
    """One prompt to one role, with where it came from and the skills it has."""

    scene: str
    scene_index: int
    turn_index: int
    role: Role
    prompt: str
    skills: tuple[str, ...] = ()
    session_turn: int = 0
    """The prompt's index within the role's ACP session (`session_turns`)."""

    def same_session(self, other: Step) -> bool:
        """Whether `other` continues this step's ACP session (same scene and role)."""
        return self.scene_index == other.scene_index and self.role.name == other.role.name


def resolve_prompt(turn_prompt: str | None, scene: str, role: str,
                   prompts: Mapping[str, str], instruction: str) -> str:
    """Turn prompt > prompts/scene.<name>.md > prompts/role.<name>.md > task instruction."""
    if turn_prompt is not None:
        return turn_prompt
    for key in (f"scene.{scene}", f"role.{role}"):
        if key in prompts:
            return prompts[key]
    return instruction


def desugar(scenes: Sequence[Scene], instruction: str,
            prompts: Mapping[str, str] | None = None,
            skills: Mapping[tuple[int, str], tuple[str, ...]] | None = None) -> list[Step]:
    """Flatten scenes into steps, resolving every prompt. Pure: no I/O.

    `skills` names the skills of each (scene index, role name); a step carries its role's.
    """
    prompts = prompts or {}
    skills = skills or {}
    steps: list[Step] = []
    for scene_index, scene in enumerate(scenes):
        roles = {r.name: r for r in scene.roles}
        for turn_index, turn in enumerate(scene.turns):
            steps.append(Step(
                scene=scene.name, scene_index=scene_index, turn_index=turn_index,
                role=roles[turn.role],
                prompt=resolve_prompt(turn.prompt, scene.name, turn.role, prompts, instruction),
                skills=skills.get((scene_index, turn.role), ()),
            ))
    return [dataclasses.replace(step, session_turn=n)
            for step, n in zip(steps, session_turns(steps), strict=True)]


def session_turns(steps: Sequence[Step]) -> list[int]:
    """Each step's index within its role's ACP session (the trajectory's `session_turn`).

    The one place that knows how sessions map to steps: today a session is a run of
    consecutive steps of one role in one scene (`session_groups`), so coder -> reviewer ->
    coder gives 0, 0, 0."""
    out: list[int] = []
    for group in session_groups(steps):
        out.extend(range(len(group)))
    return out


def session_groups(steps: Sequence[Step]) -> list[list[Step]]:
    """Consecutive steps that share one session (same scene, same role)."""
    groups: list[list[Step]] = []
    for step in steps:
        if groups and groups[-1][-1].same_session(step):
            groups[-1].append(step)
        else:
            groups.append([step])
    return groups
