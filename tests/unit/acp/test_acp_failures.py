"""How a session fails: crashes, hangs, timeouts, protocol errors; the partial trajectory stays."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest

from benchflow.acp import AcpTimeouts, AgentExitedError
from benchflow.errors import AgentExecutionError, AgentProtocolError, AgentTimeout
from benchflow.acp.session import AcpSession
from tests.fakes.clock import advance, wait_until
from tests.unit.acp.conftest import Harness

pytestmark = pytest.mark.anyio

# Timeouts here are minutes long and fire when the test jumps the loop's clock past them
# (tests/fakes/clock.py), once the agent is where the test wants it: no outcome depends on
# how fast a loaded machine runs the agent.


async def prompt_into(session: AcpSession, box: dict[str, Any]) -> None:
    box["outcome"] = await session.prompt("go")


async def expect_timeout(session: AcpSession, box: dict[str, Any]) -> None:
    with pytest.raises(AgentTimeout) as info:
        await session.prompt("go")
    box["timeout"] = info.value


async def test_crash_mid_prompt_gives_exit_code_and_stderr_tail(harness: Harness) -> None:
    harness.script(
        {
            "actions": [
                {"type": "message", "text": "before the crash"},
                {"type": "stderr", "text": "fatal: out of cheese"},
                {"type": "crash", "exit_code": 3},
                {"type": "message", "text": "never sent"},
            ]
        }
    )
    async with harness.session() as session:
        with pytest.raises(AgentExecutionError) as info:
            await session.prompt("go")
        with pytest.raises(AgentProtocolError, match="closed"):
            await session.prompt("again")
    err = info.value
    assert isinstance(err, AgentExitedError)
    assert err.error_type == "agent_execution_failed"
    assert err.exit_code == 3
    assert "fatal: out of cheese" in err.stderr_tail and "fatal: out of cheese" in str(err)
    assert [e.text for e in harness.of_type("agent_message")] == ["before the crash"]
    (error,) = harness.of_type("error")
    assert error.exit_code == 3 and "out of cheese" in (error.stderr_tail or "")


async def test_hang_hits_idle_timeout_and_cancel_is_sent_and_recorded(harness: Harness) -> None:
    harness.script({"actions": [{"type": "message", "text": "working on it"}, {"type": "hang"}]})
    timeouts = AcpTimeouts(idle_sec=60, wall_sec=None, cancel_grace_sec=600)
    async with harness.session(timeouts=timeouts) as session, anyio.create_task_group() as tg:
        tg.start_soon(expect_timeout, session, box := {})
        await wait_until(lambda: harness.of_type("agent_message"), "the agent's message")
        advance(60)  # then nothing more for the idle limit
        await wait_until(lambda: "timeout" in box, "the idle timeout")
    info = box["timeout"]
    assert info.error_type == "agent_execution_timeout"
    assert info.phase == "agent_idle" and info.timeout_sec == 60
    (error,) = harness.of_type("error")
    assert error.cancel_sent is True
    assert error.stop_reason == "cancelled"  # the agent honoured session/cancel before the kill
    assert [e.text for e in harness.of_type("agent_message")] == ["working on it"]


async def test_running_tool_call_is_not_idle(harness: Harness) -> None:
    go = harness.workdir / "go"
    harness.script(
        {
            "actions": [
                {"type": "shell", "command": "while [ ! -e go ]; do sleep 0.02; done; echo done"},
                {"type": "message", "text": "ok"},
            ]
        }
    )
    async with harness.session(timeouts=AcpTimeouts(idle_sec=60, wall_sec=None)) as session:
        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt_into, session, box := {})
            await wait_until(lambda: harness.of_type("tool_call"), "the tool call")
            advance(120)  # twice the idle limit passes while the command runs
            await anyio.wait_all_tasks_blocked()  # the session looked at its clock again
            go.touch()
    outcome = box["outcome"]
    assert outcome.agent_text == "ok" and outcome.n_tool_calls == 1
    assert harness.of_type("error") == []


async def test_wall_clock_timeout_while_streaming(harness: Harness) -> None:
    harness.script({"actions": [{"type": "slow_stream", "count": 100_000, "interval": 0.01}]})
    timeouts = AcpTimeouts(idle_sec=60, wall_sec=120, cancel_grace_sec=600)

    def ticks() -> int:
        return len(harness.of_type("agent_message", merged=False))

    async with harness.session(timeouts=timeouts) as session, anyio.create_task_group() as tg:
        tg.start_soon(expect_timeout, session, box := {})
        for _ in range(5):  # 5 x 25 s: never 60 s without an update, yet past the 120 s budget
            seen = ticks()
            await wait_until(lambda: ticks() > seen, "a new update")
            advance(25)
        await wait_until(lambda: "timeout" in box, "the wall-clock timeout")
    info = box["timeout"]
    assert info.phase == "agent" and info.timeout_sec == 120
    assert 3 <= ticks() < 100_000  # it kept updating (never idle) until the wall clock hit
    (error,) = harness.of_type("error")
    assert error.cancel_sent and "wall-clock" in error.message
    assert error.stop_reason == "cancelled"


async def test_cancel_during_a_terminal_command_kills_it(harness: Harness) -> None:
    harness.script({"actions": [{"type": "shell", "command": "sleep 600"}]})
    timeouts = AcpTimeouts(idle_sec=60, wall_sec=120, cancel_grace_sec=600)
    async with harness.session(timeouts=timeouts) as session, anyio.create_task_group() as tg:
        tg.start_soon(expect_timeout, session, box := {})
        await wait_until(lambda: len(harness.sandbox.processes) > 1, "the terminal command")
        advance(120)  # the running tool call kept the idle timer off; the wall clock fires
        await wait_until(lambda: "timeout" in box, "the wall-clock timeout")
    assert box["timeout"].phase == "agent"
    (error,) = harness.of_type("error")
    assert error.cancel_sent and error.stop_reason == "cancelled"
    statuses = [e.status for e in harness.of_type("tool_call_update")]
    assert statuses[-1] == "failed"  # the agent killed and released its terminal on cancel
    sleeper = harness.sandbox.processes[1]
    assert sleeper.returncode is not None


async def test_handshake_timeout_when_the_agent_never_answers(harness: Harness) -> None:
    timeouts = AcpTimeouts(handshake_sec=0.5)  # real time: the agent never answers at all
    with pytest.raises(AgentTimeout) as info:
        async with harness.session(argv=["sleep", "3600"], timeouts=timeouts):
            pytest.fail("handshake should not succeed")
    assert info.value.phase == "agent_handshake" and info.value.timeout_sec == 0.5
    assert harness.of_type("error")[0].error_type == "agent_execution_timeout"
    assert harness.sandbox.processes[0].returncode is not None  # killed, not left sleeping


async def test_program_that_is_not_an_agent_exits_during_handshake(harness: Harness) -> None:
    argv = ["sh", "-c", "echo 'command not found: claude' >&2; exit 127"]
    with pytest.raises(AgentExitedError) as info:
        async with harness.session(argv=argv):
            pytest.fail("handshake should not succeed")
    assert info.value.exit_code == 127
    assert "command not found: claude" in info.value.stderr_tail
    assert "initialize" in str(info.value)


async def test_agent_error_answer_is_a_protocol_error(harness: Harness) -> None:
    harness.script({"actions": [{"type": "no_such_action"}]})
    async with harness.session() as session:
        with pytest.raises(AgentProtocolError, match="no_such_action") as info:
            await session.prompt("go")
    assert not isinstance(info.value, AgentExitedError)
    assert harness.of_type("error")[0].error_type == "agent_execution_failed"


async def test_outer_cancellation_sends_session_cancel_and_cleans_up(harness: Harness) -> None:
    harness.script({"actions": [{"type": "hang"}]})
    async with harness.session() as session:
        with anyio.move_on_after(0.5) as scope:
            await session.prompt("go")
        assert scope.cancelled_caught
        process = harness.sandbox.processes[0]
    assert process.returncode is not None  # the agent is gone after the session closed
    assert "session/cancel received" in harness.stderr_path.read_text()


async def test_python_agent_path_missing(harness: Harness) -> None:
    with pytest.raises(AgentExitedError) as info:
        async with harness.session(argv=[sys.executable, "/nonexistent/agent.py"]):
            pass
    assert info.value.exit_code == 2 and "No such file" in info.value.stderr_tail
