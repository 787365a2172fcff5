"""The agent phase as the spec's phases: `connect_as(role)`, `execute(prompts)`,
`disconnect()`, repeated per role, over the sessions of a `SessionPool`.

`Rollout.run()` drives these with the desugared steps (each step says which session it
runs in); called by hand they take plain prompt strings, numbered as the scene's next
turns. Either way a role's session lives for the scene: `disconnect()` only ends the
role's turn (a `fresh` role's session, or `disconnect(close=True)`, is closed), and
moving to another scene, `end_scene()` or `aclose()` closes the scene's sessions.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence

import anyio

from benchflow.agents.base import AgentContext, AgentDriver, StepOutcome
from benchflow.config import Role, Scene
from benchflow.errors import AgentTimeout, ConfigError
from benchflow.rollout.sessions import PlaceSkills, SessionKey, SessionPool
from benchflow.steps import Step, resolve_prompt


class Turns:
    """Which role is connected in which scene, and the sessions the roles hold."""

    def __init__(self, ctx: AgentContext, drivers: Mapping[str, AgentDriver],
                 scenes: Sequence[Scene], *, place_skills: PlaceSkills | None = None,
                 before_step: Callable[[Step], Awaitable[None]] | None = None,
                 after_step: Callable[[Step, StepOutcome], Awaitable[None]] | None = None,
                 prompts: Mapping[str, str] | None = None, instruction: str = "") -> None:
        self.ctx = ctx
        self.scenes = list(scenes)
        self.pool = SessionPool(ctx, drivers, place_skills)
        self._before = before_step
        self._after = after_step
        self._prompts = dict(prompts or {})
        self._instruction = instruction
        self.scene_index: int | None = None
        self.role: Role | None = None
        self._next_turn: dict[int, int] = {}

    # -- the phases -----------------------------------------------------------------------

    async def connect_as(self, role: str | Role, scene: str | int | None = None, *,
                         fresh: bool = False, first: Step | None = None) -> None:
        """Make `role` the acting role, starting its session unless it has one open in
        the scene (`fresh`: start it over). A role of another scene than the current one
        ends the current scene first (its sessions are closed).

        `first` is the step the session opens with when it must open (run() passes the
        role's next step, so the session has its skills); by hand a placeholder is used.

        Raises:
            ConfigError: no scene declares `role` (or `scene` is unknown).
            whatever the agent's connect raised (AgentTimeout, AgentExecutionError...).
        """
        index, resolved = self._resolve(role, scene)
        if self.scene_index is not None and index != self.scene_index:
            await self.end_scene()
        self.scene_index, self.role = index, resolved
        key = (index, resolved.name)
        if fresh or not self.pool.is_open(key):
            step = first or self._step(resolved, "", fresh=True)
            await self.pool.open(step)

    async def execute(self, prompts: Sequence[str | Step] | str) -> list[StepOutcome]:
        """Send each prompt to the connected role, as its next turns, in its session.

        Raises:
            ConfigError: no role is connected (call `connect_as` first).
            AgentTimeout: the agent phase's budget ran out.
            whatever the agent's prompt raised (AgentTimeout, AgentExecutionError...).
        """
        if self.role is None or self.scene_index is None:
            raise ConfigError("execute() needs a connected role: call connect_as(role) first")
        items = [prompts] if isinstance(prompts, str) else list(prompts)
        outcomes = []
        for item in items:
            step = item if isinstance(item, Step) else self._step(self.role, item)
            key = SessionPool.key(step)
            if step.session_turn == 0 and self.pool.prompts(key) > 0:
                await self.pool.open(step)  # a fresh turn: the role starts over
            self._next_turn[step.scene_index] = step.turn_index + 1
            writer = self.ctx.trajectory
            try:
                if self._before is not None:
                    await self._before(step)
                if not self.pool.is_open(key):
                    await self.pool.open(step)
                if writer is not None:  # every event of the step names its skills
                    writer.context["skills"] = list(self.pool.skills(key)) or None
                outcome = await self._bounded(step)
                if self._after is not None:
                    await self._after(step, outcome)
            finally:
                if writer is not None:
                    writer.context.pop("skills", None)
            outcomes.append(outcome)
            if step.ends_session and isinstance(item, Step):
                self.pool.close(key)
        return outcomes

    async def disconnect(self, *, close: bool = False) -> None:
        """End the connected role's turn. Its session stays open for its later turns in
        the scene, unless the role is `fresh` or `close` is set."""
        if self.role is None or self.scene_index is None:
            return
        if close or self.role.session == "fresh":
            self.pool.close((self.scene_index, self.role.name))
        self.role = None

    async def end_scene(self) -> None:
        """Close every session of the current scene and wait for their agents to stop."""
        self.role = None
        self.scene_index = None
        await self.pool.exit()

    async def aclose(self, *exc: object) -> None:
        """Close every session (the agent phase is over)."""
        self.role = None
        self.scene_index = None
        await self.pool.exit(*exc)

    # -- helpers ----------------------------------------------------------------------------

    async def _bounded(self, step: Step) -> StepOutcome:
        """Prompt within what is left of the agent phase's budget. The session's own wall
        clock (cut to the same budget) normally fires first; this is the backstop."""
        deadline = self.ctx.agent_deadline
        if deadline is None:
            return await self.pool.prompt(step)
        left = deadline - time.monotonic()
        # a bare cancel scope, as `fail_after` holds one (without its generator and context
        # manager: objects alive for the whole turn); only its deadline can cancel it
        with anyio.CancelScope(deadline=anyio.current_time() + max(left, 0.0) + 5.0):
            return await self.pool.prompt(step)
        self.pool.cancel()
        raise AgentTimeout("agent", left, "the agent phase exceeded agent.timeout_sec "
                           "across all its turns") from TimeoutError()

    def _resolve(self, role: str | Role, scene: str | int | None) -> tuple[int, Role]:
        name = role.name if isinstance(role, Role) else role
        candidates = list(range(len(self.scenes)))
        if isinstance(scene, int):
            candidates = [scene] if 0 <= scene < len(self.scenes) else []
        elif isinstance(scene, str):
            candidates = [i for i in candidates if self.scenes[i].name == scene]
        if scene is None and self.scene_index is not None:  # the current scene first
            candidates.remove(self.scene_index)
            candidates.insert(0, self.scene_index)
        for index in candidates:
            for declared in self.scenes[index].roles:
                if declared.name == name:
                    return index, role if isinstance(role, Role) else declared
        known = sorted({r.name for s in self.scenes for r in s.roles})
        where = f" in scene {scene!r}" if scene is not None else ""
        raise ConfigError(f"connect_as: no role {name!r}{where} (roles: {', '.join(known)})")

    def _step(self, role: Role, prompt: str | None, *, fresh: bool = False) -> Step:
        """A step of a prompt given by hand: the scene's next turn (None: the role's
        prompt file or the task instruction)."""
        assert self.scene_index is not None
        scene = self.scenes[self.scene_index]
        key = (self.scene_index, role.name)
        text = resolve_prompt(prompt, scene.name, role.name, self._prompts, self._instruction)
        return Step(scene=scene.name, scene_index=self.scene_index,
                    turn_index=self._next_turn.get(self.scene_index, 0), role=role,
                    prompt=text, fresh=fresh,
                    session_turn=0 if fresh else self.pool.prompts(key), ends_session=False)

    @property
    def connected(self) -> SessionKey | None:
        if self.role is None or self.scene_index is None:
            return None
        return (self.scene_index, self.role.name)


__all__ = ["Turns"]
