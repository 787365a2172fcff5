"""End to end: the ACP client driving the real scripted agent (a subprocess)."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from benchflow.acp import AcpTimeouts
from benchflow.errors import AgentTimeout
from tests.fakes.clock import advance
from tests.unit.acp.conftest import AGENT, Harness

pytestmark = pytest.mark.anyio


async def test_single_turn_records_updates_in_wire_order(harness: Harness) -> None:
    harness.script(
        {
            "actions": [
                {"type": "thought", "text": "thinking"},
                {"type": "message", "text": "hel"},
                {"type": "message", "text": "lo"},
                {"type": "plan", "entries": [{"content": "step one", "status": "pending"}]},
                {"type": "usage", "input_tokens": 10, "output_tokens": 5, "cost": 0.25},
            ]
        }
    )
    async with harness.session(model="model-a") as session:
        outcome = await session.prompt("do the task", turn=0)
        assert session.agent_info == {
            "name": "scripted",
            "title": "Scripted ACP agent",
            "version": "1.0.0",
        }
        assert session.model_recorded == "model-a"
        assert session.model_selectable
    assert outcome.stop_reason == "end_turn"
    assert outcome.agent_text == "hello"
    assert outcome.n_tool_calls == 0
    assert outcome.usage is not None
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens, outcome.usage.cost) == (
        10,
        5,
        0.25,
    )

    events = harness.events()
    types = [e.type for e in events]
    assert types == [
        "agent_state",
        "user_message",
        "agent_thought",
        "agent_message",
        "plan",
        "usage",
        "usage",
    ]
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    assert events[0].update["currentValue"] == "model-a"
    assert events[1].text == "do the task" and events[1].turn == 0
    message = events[3]
    assert message.text == "hello" and message.chunks == 2
    assert (
        message.role == "coder"
        and message.scene == "main"
        and message.session_id == session.session_id
    )
    assert events[4].entries[0]["content"] == "step one"
    assert events[5].scope == "session" and events[5].usage.cost == 0.25
    assert events[6].scope == "turn" and events[6].usage.total_tokens == 15
    raw = harness.raw_events()
    assert [e.seq for e in raw] == list(range(raw[0].seq, raw[0].seq + len(raw)))


async def test_multi_turn_same_session_remembers(harness: Harness) -> None:
    harness.script(
        {"actions": [{"type": "echo_prompt"}]},
        {"actions": [{"type": "recall"}]},
        {"actions": [{"type": "recall"}]},
    )
    async with harness.session() as session:
        first = await session.prompt("alpha", turn=0)
        second = await session.prompt("beta", turn=1)
        third = await session.prompt("gamma", turn=2)
    assert first.agent_text == "alpha"
    assert json.loads(second.agent_text) == ["alpha"]
    assert json.loads(third.agent_text) == ["alpha", "beta"]
    turns = [(e.turn, e.text) for e in harness.of_type("agent_message")]
    assert turns == [(0, "alpha"), (1, '["alpha"]'), (2, '["alpha", "beta"]')]


async def test_turns_past_the_end_repeat_or_say_so(harness: Harness) -> None:
    harness.script({"actions": [{"type": "message", "text": "only"}]})
    async with harness.session() as session:
        assert (await session.prompt("one")).agent_text == "only"
        assert (await session.prompt("two")).agent_text == "scripted agent: no more turns"


async def test_match_wins_over_position_and_counts_across_processes(harness: Harness) -> None:
    harness.script(
        {"actions": [{"type": "message", "text": "first"}]},
        {"actions": [{"type": "message", "text": "second"}], "repeat": True},
        {"match": "review", "actions": [{"type": "message", "text": "reviewing"}]},
    )
    async with harness.session() as session:
        assert (await session.prompt("go")).agent_text == "first"
        assert (await session.prompt("please review this")).agent_text == "reviewing"
    async with harness.session() as session:  # a new process continues the role's count
        assert (await session.prompt("go on")).agent_text == "second"  # k=2 is past the end: repeat
        assert (await session.prompt("go on")).agent_text == "second"


async def test_model_as_script_path_and_authentication(harness: Harness) -> None:
    script = harness.script({"actions": [{"type": "status"}]})
    env = harness.env()
    del env["SCRIPTED_AGENT_SCRIPT"]
    async with harness.session(
        env=env, model=str(script), credentials={"SCRIPTED_AGENT_API_KEY": "k-123"}
    ) as session:
        outcome = await session.prompt("who are you")
        assert session.auth_method == "scripted-api-key"
    status = json.loads(outcome.agent_text)
    assert status["model"] == str(script)
    assert status["authenticated"] == "scripted-api-key"
    assert status["cwd"] == str(harness.workdir)


async def test_no_credentials_means_no_authenticate(harness: Harness) -> None:
    harness.script({"actions": [{"type": "status"}]})
    async with harness.session() as session:
        outcome = await session.prompt("status")
        assert session.auth_method is None
    assert json.loads(outcome.agent_text)["authenticated"] is None


async def test_secrets_never_on_a_command_line(harness: Harness) -> None:
    secret = "sk-very-secret-'$(id)'-value"
    harness.script(
        {
            "actions": [
                {
                    "type": "shell",
                    "via": "local",
                    "command": 'test "$SCRIPTED_AGENT_API_KEY" = "$EXPECTED" && echo key-ok',
                },
            ]
        }
    )
    env = harness.env(EXPECTED=secret)
    async with harness.session(env=env, credentials={"SCRIPTED_AGENT_API_KEY": secret}) as session:
        await session.prompt("check")
        env_file, mode = harness.sandbox.uploads[0]
        assert stat.S_IMODE(mode) == 0o600
        assert not os.path.exists(env_file)  # sourced and deleted by the launcher
    for argv in harness.sandbox.calls:
        assert not any(secret in arg for arg in argv), argv
    done = [e for e in harness.of_type("tool_call_update") if e.status == "completed"]
    assert "key-ok" in done[0].update["rawOutput"]["output"]
    assert secret not in harness.trajectory_path.read_text()


async def test_stderr_is_drained_to_file(harness: Harness) -> None:
    # 400 KB on stderr: far more than a pipe holds, so an undrained pipe would hang the agent.
    harness.script(
        {
            "actions": [
                {"type": "stderr", "text": "e" * 1000, "repeat": 400},
                {"type": "stderr", "text": "last words"},
                {"type": "message", "text": "still alive"},
            ]
        }
    )
    async with harness.session() as session:
        outcome = await session.prompt("go")
        assert "last words" in session.stderr_tail()
    assert outcome.agent_text == "still alive"
    assert harness.stderr_path.stat().st_size > 400_000


async def test_an_agent_silent_on_stderr_leaves_no_stderr_file(harness: Harness) -> None:
    # made at the first bytes (as the stdout noise file is): no empty file, no empty folder
    harness.script({"actions": [{"type": "message", "text": "quiet"}]})
    async with harness.session() as session:
        outcome = await session.prompt("go")
        assert session.stderr_tail() == ""
    assert outcome.agent_text == "quiet"
    assert not harness.stderr_path.parent.exists()


async def test_non_json_stdout_lines_are_kept_not_fatal(harness: Harness) -> None:
    harness.script(
        {
            "actions": [
                {"type": "stdout_garbage", "text": "Debugger listening on ws://127.0.0.1"},
                {"type": "message", "text": "after garbage"},
            ]
        }
    )
    async with harness.session() as session:
        outcome = await session.prompt("go")
        assert session.stdout_noise == ["Debugger listening on ws://127.0.0.1"]
    assert outcome.agent_text == "after garbage"
    noise_file = harness.stderr_path.with_name("coder.stdout-noise.txt")
    assert noise_file.read_text() == "Debugger listening on ws://127.0.0.1\n"


async def test_five_megabyte_line(harness: Harness) -> None:
    harness.script(
        {
            "actions": [
                {"type": "huge_message", "bytes": 5_000_000},
                {"type": "message", "text": "!"},
            ]
        }
    )
    async with harness.session() as session:
        outcome = await session.prompt("go")
    assert len(outcome.agent_text) == 1_000_000 and outcome.agent_text.endswith(
        "y!"
    )  # capped; the end kept
    (message,) = harness.of_type("agent_message")
    assert len(message.text) == 5_000_001 and message.chunks == 2


async def test_ten_thousand_updates_in_order_none_lost(harness: Harness) -> None:
    harness.script(
        {
            "actions": [
                {"type": "message", "text": "begin\n"},
                {"type": "stream", "count": 10_000, "text": "u", "numbered": True},
                {"type": "message", "text": "end\n"},
            ]
        }
    )
    async with harness.session() as session:
        outcome = await session.prompt("stream")
    expected = "begin\n" + "".join(f"u{i}\n" for i in range(10_000)) + "end\n"
    assert outcome.agent_text == expected
    raw = harness.of_type("agent_message", merged=False)
    assert len(raw) == 10_002
    assert "".join(e.text for e in raw) == expected
    seqs = [e.seq for e in raw]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_python_agent_argv_is_the_launched_program(harness: Harness) -> None:
    harness.script({"actions": [{"type": "message", "text": "x"}]})
    async with harness.session() as session:
        await session.prompt("go")
    launch = harness.sandbox.calls[0]
    assert launch[:2] == ["sh", "-c"] and launch[-2:] == [sys.executable, str(AGENT)]


async def test_wall_budget_counts_from_open(harness: Harness) -> None:
    harness.script({"actions": [{"type": "message", "text": "x"}], "repeat": True})
    timeouts = AcpTimeouts(wall_sec=120, cancel_grace_sec=600)
    async with harness.session(timeouts=timeouts) as session:
        await session.prompt("go")
        advance(120)  # the budget is spent between prompts (tests/fakes/clock.py)
        with pytest.raises(AgentTimeout) as info:
            await session.prompt("again")
    assert info.value.phase == "agent" and info.value.timeout_sec == 120


async def test_new_session_on_the_same_process_forgets_earlier_prompts(harness: Harness) -> None:
    harness.script({"actions": [{"type": "recall"}], "repeat": True})
    async with harness.session(model="m1") as session:
        await session.prompt("round zero", turn=0, round=0)
        first_id = session.session_id
        second_id = await session.new_session()
        outcome = await session.prompt("round one", turn=0, round=1)
        assert session.model_recorded == "m1"
    assert second_id != first_id and session.session_id == second_id
    assert json.loads(outcome.agent_text) == []  # a fresh session has no history
    rounds = [(e.round, e.session_id) for e in harness.of_type("user_message")]
    assert rounds == [(0, first_id), (1, second_id)]
    assert len([e for e in harness.of_type("agent_state") if e.name == "model"]) == 2
