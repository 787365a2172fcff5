"""The open sessions of a rollout's roles: each role's agent process and session stay up
for its whole scene, while other roles take their turns.

Every session is served by a task of its own (`SessionPool`'s task group), so sessions
open and close in any order: a role's session starts at its first step, stays open while
other roles' sessions answer, and closes after its last step (`Step.ends_session`), in
the background, while the next role already works. Which steps share a session is
decided before anything runs (`steps.assign_sessions`); the pool only follows it.

A session task never raises into the group: what its connect or prompt raises is handed
to the caller of `open()` / `prompt()` and raised there as itself. Steps reach a session
task through its `_Session` (a queue and an event made only while the task waits), not a
memory stream: with hundreds of rollouts in flight, fewer objects alive per session.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from benchflow.agents.base import AgentConnection, AgentContext, AgentDriver, StepOutcome
from benchflow.steps import Step

log = logging.getLogger(__name__)

PlaceSkills = Callable[[AgentDriver, Step], Awaitable[tuple[str, ...]]]
"""Places a session's skills before its agent starts; returns their names."""

SessionKey = tuple[int, str]
"""(scene index, role name): the session a role has in a scene."""


@dataclass
class _Request:
    step: Step
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: StepOutcome | None = None
    error: BaseException | None = None


@dataclass(eq=False)
class _Session:
    """One open session: its first step, the skills it has, the steps sent to it."""

    first: Step
    skills: tuple[str, ...]
    prompts: int = 0
    resumed: bool = False
    """The agent restored the role's earlier session (session/load)."""
    session_id: str | None = None
    """The ACP session id, for ACP agents."""
    queue: list[_Request] = field(default_factory=list)
    closing: bool = False
    """No more steps: the session task ends once the queued ones are answered."""
    ended: bool = False
    """The session task has ended: steps sent now are refused."""
    wake: anyio.Event | None = None
    """Set when a step arrives or the session closes; exists while the task waits."""

    def post(self, request: _Request | None) -> None:
        """Queue a step (None: close once the queued steps are answered).

        Raises:
            anyio.BrokenResourceError: the session task has ended.
        """
        if request is None:
            self.closing = True
        elif self.ended:
            raise anyio.BrokenResourceError
        else:
            self.queue.append(request)
        if self.wake is not None:
            self.wake.set()

    async def next(self) -> _Request | None:
        """The next step to answer, or None once the session is closing."""
        while not self.queue:
            if self.closing:
                return None
            self.wake = anyio.Event()
            try:
                await self.wake.wait()
            finally:
                self.wake = None
        return self.queue.pop(0)


class SessionPool:
    """The sessions of the roles now taking turns, one per (scene index, role name).

    `open(step)` starts the session of the step's role (placing its skills, starting its
    agent, connecting), replacing one the role had; `prompt(step)` sends a step to it;
    `close(key)` lets it end in the background. Leaving the pool (`exit()`) closes every
    session and waits until each agent has stopped.
    """

    def __init__(self, ctx: AgentContext, drivers: Mapping[str, AgentDriver],
                 place_skills: PlaceSkills | None = None) -> None:
        self.ctx = ctx
        self.drivers = drivers
        self._place_skills = place_skills
        self._sessions: dict[SessionKey, _Session] = {}
        self._tg: TaskGroup | None = None
        self.on_open: Callable[[Step, AgentConnection], None] | None = None
        """Called with each session's first step and connection, once it is open."""

    async def __aenter__(self) -> SessionPool:
        await self.enter()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.exit(*exc)

    async def enter(self) -> None:
        """Start the task group the sessions run in (idempotent)."""
        if self._tg is not None:
            return
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg

    async def exit(self, *exc: Any) -> None:
        """Close every session and wait until each has stopped. The group's error is
        raised unwrapped when it is one (the sessions' tasks never raise, so a group of
        one is the caller's own error)."""
        tg, self._tg = self._tg, None
        if tg is None:
            return
        self.close_all()
        try:
            await tg.__aexit__(*(exc or (None, None, None)))
        except BaseExceptionGroup as group:
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    def cancel(self) -> None:
        """Stop every session now (a prompt in flight is cancelled, the agents stopped)."""
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    @staticmethod
    def key(step: Step) -> SessionKey:
        return (step.scene_index, step.role.name)

    def is_open(self, key: SessionKey) -> bool:
        return key in self._sessions

    def prompts(self, key: SessionKey) -> int:
        """Prompts the role's open session answered so far (0 when none is open)."""
        session = self._sessions.get(key)
        return session.prompts if session is not None else 0

    def skills(self, key: SessionKey) -> tuple[str, ...]:
        """The skills the role's open session has (placed when it opened)."""
        session = self._sessions.get(key)
        return session.skills if session is not None else ()

    def session_id(self, key: SessionKey) -> str | None:
        """The ACP session id of the role's open session (None: none, or not ACP)."""
        session = self._sessions.get(key)
        return session.session_id if session is not None else None

    @property
    def keys(self) -> list[SessionKey]:
        return list(self._sessions)

    async def open(self, step: Step) -> None:
        """Start a session for the step's role (the role's open one, if any, is closed).

        Raises:
            whatever the driver's connect raised (ConfigError, AgentTimeout...).
        """
        key = self.key(step)
        self.close(key)
        await self.enter()
        assert self._tg is not None
        driver = self.drivers[step.role.agent]
        skills = (await self._place_skills(driver, step) if self._place_skills is not None
                  else step.skills)
        session = _Session(first=step, skills=skills)
        writer = self.ctx.trajectory
        before = writer.context.get("skills") if writer is not None else None
        if writer is not None:  # what the handshake records names the session's skills
            writer.context["skills"] = list(skills) or None
        try:
            await self._tg.start(self._serve, driver, session,
                                 name=f"session-{step.scene}-{step.role.name}")
        finally:
            if writer is not None:
                writer.context["skills"] = before
                if before is None:
                    writer.context.pop("skills", None)
        self._sessions[key] = session

    async def prompt(self, step: Step) -> StepOutcome:
        """Answer `step` in its role's session (opened first when none is open).

        Raises:
            whatever the driver's connect or prompt raised (AgentTimeout, ConfigError...).
        """
        key = self.key(step)
        if key not in self._sessions:
            await self.open(step)
        session = self._sessions[key]
        if step.history is not None and not session.resumed:  # a fork's replayed turns
            from benchflow.rollout.replay import with_history  # forks only

            step = dataclasses.replace(step, prompt=with_history(step.history, step.prompt))
        request = _Request(dataclasses.replace(step, skills=session.skills))
        try:
            session.post(request)
            await request.done.wait()
        finally:
            session.prompts += 1
        if request.error is not None:
            raise request.error
        assert request.outcome is not None
        return request.outcome

    def close(self, key: SessionKey) -> None:
        """Let the role's session end: its task closes the connection in the background."""
        found = self._sessions.pop(key, None)
        if found is not None:
            found.post(None)

    def close_all(self) -> None:
        for key in list(self._sessions):
            self.close(key)

    async def _serve(self, driver: AgentDriver, session: _Session,
                     *, task_status: TaskStatus[None]) -> None:
        step = session.first
        started = False
        try:
            async with driver.connect(self.ctx, step.role, step.scene) as connection:
                session.resumed = bool(getattr(connection, "resumed", False))
                session.session_id = getattr(getattr(connection, "session", None),
                                             "session_id", None)
                if self.on_open is not None:
                    self.on_open(step, connection)
                task_status.started()
                started = True
                while (request := await session.next()) is not None:  # no task per prompt
                    try:
                        request.outcome = await connection.prompt(request.step)
                    except Exception as exc:  # noqa: BLE001 - raised by the caller of prompt()
                        request.error = exc
                    finally:
                        request.done.set()
        except Exception as exc:  # noqa: BLE001 - before started(): raised to open()'s caller
            if not started:
                raise
            log.warning("the session of role %s (scene %s) failed while closing: %s",
                        step.role.name, step.scene, exc)
        finally:
            session.ended = True
            for request in session.queue:  # sent, never answered: refused
                request.error = anyio.BrokenResourceError()
                request.done.set()
            session.queue.clear()


__all__ = ["SessionKey", "SessionPool"]
