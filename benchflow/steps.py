"""Desugaring: scenes of roles and turns become the flat list of steps the runtime runs.

Which session each step runs in is decided here too, before anything runs: a role keeps
one session for its whole scene (its later turns continue it, also after other roles took
turns), a `fresh` turn starts the role over, a `fresh` role gets a new session whenever
another role had the turn in between (consecutive turns still share one). Each step says
its session (`session`, unique in the rollout), its index in it (`session_turn`) and
whether it is the session's last (`ends_session`: the runtime closes it after the step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

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
    fresh: bool = False
    """The turn asked for a new session (`Turn.session: fresh`)."""
    session: int = 0
    """The session the step runs in (numbered in order of opening, over the rollout)."""
    session_turn: int = 0
    """The step's prompt index in its session (0: the step opens it)."""
    ends_session: bool = True
    """No later step uses this step's session: it is closed after this step."""
    history: str | None = None
    """A forked rollout's summary of the role's turns before the fork: sent before the
    prompt unless the agent restored its session itself (`rollout/replay.py`)."""


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
                fresh=turn.session == "fresh",
            ))
    return assign_sessions(steps)


def assign_sessions(steps: Sequence[Step]) -> list[Step]:
    """`steps` with `session`, `session_turn` and `ends_session` set (module docstring)."""
    current: dict[tuple[int, str], int] = {}  # (scene, role) -> its open session
    used: dict[int, int] = {}  # session -> prompts so far
    previous: Step | None = None
    out: list[Step] = []
    for step in steps:
        key = (step.scene_index, step.role.name)
        session = current.get(key)
        if (session is None or step.fresh or (step.role.session == "fresh"
                                              and previous is not None
                                              and previous.session != session)):
            session = current[key] = len(used)
            used[session] = 0
        step = replace(step, session=session, session_turn=used[session])
        used[session] += 1
        out.append(step)
        previous = step
    last = {step.session: i for i, step in enumerate(out)}
    return [replace(step, ends_session=last[step.session] == i) for i, step in enumerate(out)]


def session_groups(steps: Sequence[Step]) -> list[list[Step]]:
    """The steps of each session, in order of opening (for reading a plan)."""
    groups: dict[int, list[Step]] = {}
    for step in steps:
        groups.setdefault(step.session, []).append(step)
    return list(groups.values())
