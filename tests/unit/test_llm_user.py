"""LLMUser against the scripted model server: the persona's messages, DONE, max rounds."""

from __future__ import annotations

import pytest

from benchflow.errors import ConfigError
from benchflow.model_server import ModelServer, parse_script
from benchflow.trajectory.events import AgentMessageEvent, utc_now
from benchflow.users import LLMUser, RoundResult, user_from_frontmatter

pytestmark = pytest.mark.anyio

SCRIPT = parse_script({"answers": [{"match": "Write your first message", "steps": [
    {"text": "Hi! Please create hello.txt saying Hello, world!"},
    {"text": "Almost: fix the newline."},
    {"text": "DONE"}]}]})


def _round(index: int, reward: float, text: str) -> RoundResult:
    event = AgentMessageEvent(seq=1, ts=utc_now(), text=text, update={})
    return RoundResult(round=index, trajectory=(event,), rewards={"reward": reward},
                       verifier_output="1 failed" if reward < 1 else "ok")


async def test_messages_come_from_the_model_until_done() -> None:
    with ModelServer(SCRIPT) as server:
        user = LLMUser(persona="a terse engineer", model="persona-model",
                       base_url=f"{server.url}/v1")
        await user.setup("Create hello.txt", None)
        first = await user.run(0, "Create hello.txt", None)
        second = await user.run(1, "Create hello.txt", _round(0, 0.0, "I wrote hello.txt"))
        third = await user.run(2, "Create hello.txt", _round(1, 1.0, "Fixed."))
        bodies = [r for r in server.requests]
    assert first == "Hi! Please create hello.txt saying Hello, world!"
    assert second == "Almost: fix the newline."
    assert third is None
    assert len(bodies) == 3 and all(r["model"] == "persona-model" for r in bodies)
    observation = user.transcript[2]["content"]
    assert "Rewards: {'reward': 0.0}" in observation and "I wrote hello.txt" in observation
    assert "1 failed" in observation


async def test_max_rounds_stops_without_a_call() -> None:
    user = LLMUser(persona="p", model="m", base_url="http://127.0.0.1:9/v1", max_rounds=1)
    assert await user.run(1, "x", None) is None


async def test_without_endpoint_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="model endpoint"):
        await LLMUser(persona="p").run(0, "x", None)


def test_frontmatter_block() -> None:
    user = user_from_frontmatter({"type": "llm", "persona": "a PM", "model": "m",
                                  "max_rounds": 2})
    assert isinstance(user, LLMUser) and user.max_rounds == 2 and user.endpoint is None
    with pytest.raises(ConfigError, match="user.persona"):
        user_from_frontmatter({"type": "llm"})
    with pytest.raises(ConfigError, match="user.personna"):
        user_from_frontmatter({"persona": "x", "personna": "y"})
    with pytest.raises(ConfigError, match="not supported"):
        user_from_frontmatter({"type": "python", "persona": "x"})


def test_a_rounds_events_include_updates_the_recorder_still_holds(tmp_path):
    """The user reads the round from the trajectory: updates held in memory (a burst
    within the flush interval) are written first."""
    from types import SimpleNamespace

    from benchflow.rollout.user_loop import _round_events
    from benchflow.trajectory import TrajectoryWriter
    from benchflow.trajectory.events import update_line

    writer = TrajectoryWriter(tmp_path / "t.jsonl")
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    writer.write_line(update_line(chunk, seq=writer.next_seq(), ts=utc_now(), round=1),
                      flush=False)
    events = _round_events(SimpleNamespace(trajectory=writer), 1)  # type: ignore[arg-type]
    assert [e.text for e in events] == ["hi"]  # type: ignore[union-attr]
    writer.close()
