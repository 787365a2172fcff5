"""Which skills each step of a rollout has, and placing them before each session.

Host skills (the task's `skills/`, the rollout's, each scene's and role's) are resolved
when the rollout is set up, so the desugared steps already name them. Skills that only
exist inside the sandbox join at run time: the task's `sandbox.skills_dir` (Harbor's
`environment.skills_dir`) from the start, and those a scene wrote into its `skills_out`
folder from the next scene on (bring your own skill).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from benchflow.agents.acp_driver import role_user
from benchflow.agents.base import AgentContext, AgentDriver
from benchflow.agents.skill_placement import SkillStage
from benchflow.config import RolloutConfig, Scene
from benchflow.skills import Skill, discover_skills, resolve_layers, skills_from_paths
from benchflow.steps import Step
from benchflow.task import Task

log = logging.getLogger(__name__)

SessionKey = tuple[int, str]
"""(scene index, role name): the skills of a role in a scene."""


class RolloutSkills:
    """The skills of one rollout: resolved at setup, staged at start, placed per session."""

    def __init__(self, config: RolloutConfig, task: Task, scenes: list[Scene]) -> None:
        task_layer = discover_skills(task.skills_folder) if task.skills_folder else []
        rollout_layer = skills_from_paths(config.skills)
        self.scenes = scenes
        self.sandbox_dir = task.config.sandbox.skills_dir
        self.host: dict[str, Skill] = {}
        self.by_session: dict[SessionKey, tuple[str, ...]] = {}
        for index, scene in enumerate(scenes):
            scene_layer = skills_from_paths(scene.skills)
            for role in scene.roles:
                merged = resolve_layers([task_layer, rollout_layer, scene_layer,
                                         skills_from_paths(role.skills)])
                self.host.update(merged)
                self.by_session[(index, role.name)] = tuple(merged)
        self.runtime: list[str] = []  # sandbox skills: the task's, then generated ones
        self._stage: SkillStage | None = None
        self._harvested: set[int] = set()
        self._warned: set[str] = set()

    @property
    def declared(self) -> Mapping[SessionKey, tuple[str, ...]]:
        """Host skills by (scene index, role name), for `steps.desugar`."""
        return self.by_session

    @property
    def any(self) -> bool:
        return bool(self.host or self.sandbox_dir
                    or any(scene.skills_out for scene in self.scenes))

    async def stage(self, ctx: AgentContext) -> None:
        """Stage every host skill and the task's sandbox skills (once, after the start)."""
        if not self.any:
            return
        self._stage = SkillStage(ctx.sandbox)
        await self._stage.add_host(self.host.values())
        if self.sandbox_dir:
            self.runtime.extend(await self._stage.add_sandbox_dir(self.sandbox_dir))

    @asynccontextmanager
    async def session(self, ctx: AgentContext, driver: AgentDriver,
                      step: Step) -> AsyncIterator[tuple[str, ...]]:
        """Around one session: place the skills of its first step, yield their names, and
        stamp them on every trajectory event written meanwhile."""
        names = await self.place(ctx, driver, step)
        writer = ctx.trajectory
        if writer is not None:
            writer.context["skills"] = list(names) or None
        try:
            yield names
        finally:
            if writer is not None:
                writer.context.pop("skills", None)

    async def place(self, ctx: AgentContext, driver: AgentDriver, step: Step) -> tuple[str, ...]:
        """Collect skills earlier scenes wrote, place the step's skills for its agent, and
        return the names of every skill the step has."""
        if self._stage is None:
            return step.skills
        await self._harvest(step.scene_index)
        names = tuple(dict.fromkeys((*step.skills, *self.runtime)))
        skills_dir: str | None = getattr(driver, "skills_dir", None)  # drivers without one
        if skills_dir is not None:                                   # read no skills
            user = await role_user(ctx, step.role.name)
            await self._stage.place(user=user.name, home=user.home, skills_dir=skills_dir,
                                    names=names)
        elif names and driver.name not in self._warned and hasattr(driver, "manifest"):
            self._warned.add(driver.name)
            log.warning("agent %s declares no skills_dir in its manifest: its skills (%s) "
                        "are not placed", driver.name, ", ".join(names))
        return names

    async def _harvest(self, scene_index: int) -> None:
        """Stage what finished scenes left in their `skills_out` folders (once each)."""
        assert self._stage is not None
        for index in range(scene_index):
            folder = self.scenes[index].skills_out
            if folder and index not in self._harvested:
                self._harvested.add(index)
                made = await self._stage.add_sandbox_dir(folder)
                log.info("scene %s wrote skills: %s", self.scenes[index].name,
                         ", ".join(made) or "none")
                self.runtime.extend(n for n in made if n not in self.runtime)


__all__ = ["RolloutSkills"]
