"""How a session fails: crashes, hangs, timeouts, protocol errors; the partial trajectory stays."""

from __future__ import annotations

import sys
import time

import anyio
import pytest

from benchflow.acp import AcpTimeouts, AgentExitedError
from benchflow.errors import AgentExecutionError, AgentProtocolError, AgentTimeout
from tests.unit.acp.conftest import Harness

pytestmark = pytest.mark.anyio


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
    timeouts = AcpTimeouts(idle_sec=0.5, wall_sec=30, cancel_grace_sec=3)
    async with harness.session(timeouts=timeouts) as session:
        started = time.monotonic()
        with pytest.raises(AgentTimeout) as info:
            await session.prompt("go")
        assert time.monotonic() - started < 3
    assert info.value.error_type == "agent_execution_timeout"
    assert info.value.phase == "agent_idle" and info.value.timeout_sec == 0.5
    (error,) = harness.of_type("error")
    assert error.cancel_sent is True
    assert error.stop_reason == "cancelled"  # the agent honoured session/cancel before the kill
    assert [e.text for e in harness.of_type("agent_message")] == ["working on it"]


async def test_running_tool_call_is_not_idle(harness: Harness) -> None:
    harness.script(
        {
            "actions": [
                {"type": "shell", "command": "sleep 0.9; echo slept"},
                {"type": "message", "text": "ok"},
            ]
        }
    )
    async with harness.session(timeouts=AcpTimeouts(idle_sec=0.3, wall_sec=30)) as session:
        outcome = await session.prompt("go")
    assert outcome.agent_text == "ok" and outcome.n_tool_calls == 1


async def test_wall_clock_timeout_while_streaming(harness: Harness) -> None:
    harness.script({"actions": [{"type": "slow_stream", "count": 1000, "interval": 0.1}]})
    timeouts = AcpTimeouts(idle_sec=0.5, wall_sec=1.5, cancel_grace_sec=2)
    async with harness.session(timeouts=timeouts) as session:
        with pytest.raises(AgentTimeout) as info:
            await session.prompt("go")
    assert info.value.phase == "agent" and info.value.timeout_sec == 1.5
    ticks = harness.of_type("agent_message", merged=False)
    assert 3 <= len(ticks) < 20  # kept updating (never idle) until the wall clock hit
    (error,) = harness.of_type("error")
    assert error.cancel_sent and "wall-clock" in error.message


async def test_cancel_during_a_terminal_command_kills_it(harness: Harness) -> None:
    harness.script({"actions": [{"type": "shell", "command": "sleep 30"}]})
    timeouts = AcpTimeouts(idle_sec=0.3, wall_sec=1.2, cancel_grace_sec=3)
    async with harness.session(timeouts=timeouts) as session:
        with pytest.raises(AgentTimeout) as info:
            await session.prompt("go")  # the running tool call keeps the idle timer off
    assert info.value.phase == "agent"
    (error,) = harness.of_type("error")
    assert error.cancel_sent and error.stop_reason == "cancelled"
    statuses = [e.status for e in harness.of_type("tool_call_update")]
    assert statuses[-1] == "failed"  # the agent killed and released its terminal on cancel
    sleeper = harness.sandbox.processes[1]
    assert sleeper.returncode is not None


async def test_handshake_timeout_when_the_agent_never_answers(harness: Harness) -> None:
    timeouts = AcpTimeouts(handshake_sec=0.5)
    started = time.monotonic()
    with pytest.raises(AgentTimeout) as info:
        async with harness.session(argv=["sleep", "30"], timeouts=timeouts):
            pytest.fail("handshake should not succeed")
    assert info.value.phase == "agent_handshake"
    assert time.monotonic() - started < 5
    assert harness.of_type("error")[0].error_type == "agent_execution_timeout"


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
