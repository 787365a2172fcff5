"""The roles' sessions during the agent phase (`rollout/turns.py`, `rollout/sessions.py`),
with a recording driver: when sessions open and close, what each prompt reaches, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import pytest

from benchflow.agents.base import AgentContext, StepOutcome
from benchflow.config import Role, Scene, Turn
from benchflow.errors import AgentExecutionError, ConfigError
from benchflow.rollout.sessions import SessionPool
from benchflow.rollout.turns import Turns
from benchflow.steps import Step, desugar
from tests.fakes.clock import wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recorder:
    """A driver whose connections log (event, role, connection number, detail)."""

    name = "rec"

    def __init__(self, fail_on: str | None = None) -> None:
        self.log: list[tuple[str, str, int, str]] = []
        self.n = 0
        self.fail_on = fail_on

    async def install(self, ctx: AgentContext) -> None:
        return None

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[object]:
        self.n += 1
        number = self.n
        self.log.append(("open", role.name, number, scene))
        recorder = self

        class Connection:
            async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
                recorder.log.append(("prompt", role.name, number, step.prompt))
                if step.prompt == recorder.fail_on:
                    raise AgentExecutionError("boom")
                await anyio.sleep(0)
                return StepOutcome(agent_text=f"{role.name}:{step.prompt}")

        try:
            yield Connection()
        finally:
            self.log.append(("close", role.name, number, scene))


def context() -> AgentContext:
    return AgentContext(sandbox=None, task=None, paths=None, workdir="/",  # type: ignore[arg-type]
                        agent_user=None, instruction_path="/tmp/i.md")


def scene(*turns: tuple[str, str], fresh_role: str | None = None) -> Scene:
    roles = [Role(name=n, agent="rec", session="fresh" if n == fresh_role else "persistent")
             for n in dict.fromkeys(r for r, _ in turns)]
    return Scene(roles=roles, turns=[Turn(role=r, prompt=p) for r, p in turns])


async def run_plan(scenes: list[Scene], driver: Recorder) -> list[StepOutcome]:
    steps = desugar(scenes, "instr")
    turns = Turns(context(), {"rec": driver}, scenes)
    outcomes = []
    try:
        for step in steps:
            await turns.connect_as(step.role, step.scene_index, first=step)
            outcomes += await turns.execute([step])
            await turns.disconnect()
    finally:
        await turns.aclose()
    return outcomes


async def test_a_role_keeps_one_session_while_another_works_and_closes_after_its_last():
    driver = Recorder()
    await run_plan([scene(("coder", "a"), ("reviewer", "b"), ("coder", "c"))], driver)
    assert driver.log == [
        ("open", "coder", 1, "main"), ("prompt", "coder", 1, "a"),
        ("open", "reviewer", 2, "main"), ("prompt", "reviewer", 2, "b"),
        ("close", "reviewer", 2, "main"),  # its last turn: closed while the coder goes on
        ("prompt", "coder", 1, "c"), ("close", "coder", 1, "main")]


async def test_a_fresh_role_reconnects_after_another_role_and_scenes_restart_everyone():
    driver = Recorder()
    first = scene(("coder", "a"), ("reviewer", "b"), ("coder", "c"), fresh_role="coder")
    second = scene(("coder", "d")).model_copy(update={"name": "two"})
    await run_plan([first, second], driver)
    opens = [(role, n) for event, role, n, _ in driver.log if event == "open"]
    assert opens == [("coder", 1), ("reviewer", 2), ("coder", 3), ("coder", 4)]
    assert [e for e in driver.log if e[0] == "close" and e[2] == 1] == [
        ("close", "coder", 1, "main")]  # closed when the reviewer took the turn
    assert driver.log.index(("close", "coder", 1, "main")) < driver.log.index(
        ("open", "reviewer", 2, "main"))


async def test_prompts_by_hand_continue_the_connected_roles_session():
    driver = Recorder()
    sc = scene(("coder", "x"), ("reviewer", "y"))
    turns = Turns(context(), {"rec": driver}, [sc])
    try:
        await turns.connect_as("coder")
        await turns.execute(["one", "two"])
        await turns.disconnect()
        await turns.connect_as("reviewer")
        (out,) = await turns.execute("three")
        await turns.disconnect()
        await turns.connect_as("coder")
        await turns.execute("four")
        assert out.agent_text == "reviewer:three"
    finally:
        await turns.aclose()
    assert [(e[1], e[2], e[3]) for e in driver.log if e[0] == "prompt"] == [
        ("coder", 1, "one"), ("coder", 1, "two"), ("reviewer", 2, "three"), ("coder", 1, "four")]
    # two sessions in all, both open until the end (closed together, in any order)
    assert sorted(e[:3] for e in driver.log if e[0] == "close") == [
        ("close", "coder", 1), ("close", "reviewer", 2)]
    assert driver.log.index(("prompt", "coder", 1, "four")) < min(
        i for i, e in enumerate(driver.log) if e[0] == "close")


async def test_an_agent_error_reaches_the_caller_as_itself_and_every_session_closes():
    driver = Recorder(fail_on="b")
    with pytest.raises(AgentExecutionError, match="boom"):
        await run_plan([scene(("coder", "a"), ("reviewer", "b"), ("coder", "c"))], driver)
    assert {e[1] for e in driver.log if e[0] == "close"} == {"coder", "reviewer"}
    assert ("prompt", "coder", 1, "c") not in driver.log


async def test_execute_without_a_connected_role_and_unknown_roles_are_config_errors():
    turns = Turns(context(), {"rec": Recorder()}, [scene(("coder", "a"))])
    with pytest.raises(ConfigError, match="connect_as"):
        await turns.execute("x")
    with pytest.raises(ConfigError, match="no role 'ghost'.*roles: coder"):
        await turns.connect_as("ghost")
    await turns.aclose()


class Dying(Recorder):
    """A driver whose connection fails in the background once `die` is set (a task of its
    own task group raises, as an ACP session's would), ending the session's task."""

    def __init__(self) -> None:
        super().__init__()
        self.die = anyio.Event()

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[object]:
        async def fail() -> None:
            await self.die.wait()
            raise AgentExecutionError("connection lost")

        async with anyio.create_task_group() as tg, Recorder.connect(
                self, ctx, role, scene) as connection:
            tg.start_soon(fail)
            yield connection


async def test_a_step_for_a_session_whose_task_ended_is_refused_not_left_waiting():
    driver = Dying()
    first, second = desugar([scene(("coder", "a"), ("coder", "b"))], "instr")
    with anyio.fail_after(120):  # only a guard: the bug this pins was a caller waiting forever
        async with SessionPool(context(), {"rec": driver}) as pool:
            assert (await pool.prompt(first)).agent_text == "coder:a"
            driver.die.set()
            await wait_until(lambda: driver.log[-1][0] == "close", "the connection's end")
            with pytest.raises(anyio.BrokenResourceError):
                await pool.prompt(second)
    assert [e[0] for e in driver.log] == ["open", "prompt", "close"]
