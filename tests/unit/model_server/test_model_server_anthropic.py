"""The Anthropic Messages wire format, parsed by the official `anthropic` SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from benchflow.model_server import ModelServer

PROMPT = {"role": "user", "content": [{"type": "text", "text": "Write 42 to /app/answer.txt"}]}


@pytest.fixture
def tools(schemas: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "name": "BashOutput",
            "description": "read output",
            "input_schema": schemas["claude_bash_output"],
        },
        {"name": "Bash", "description": "Run a command", "input_schema": schemas["claude"]},
    ]


@pytest.fixture
def client(server: ModelServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=server.url, api_key="x", max_retries=0) as c:
        yield c


def _tool_turn(call_id: str, name: str, args: dict[str, Any], output: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": call_id, "name": name, "input": args}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call_id, "content": output}],
        },
    ]


def test_plain_tool_call_round_trips(
    client: anthropic.Anthropic, tools: list[dict[str, Any]]
) -> None:
    first = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, messages=[PROMPT], tools=tools
    )
    assert first.stop_reason == "tool_use"
    (call,) = [b for b in first.content if b.type == "tool_use"]
    assert call.name == "Bash"
    assert call.input == {"command": "echo 42 > /app/answer.txt"}
    assert first.usage.input_tokens > 0 and first.usage.output_tokens > 0

    history = [PROMPT, *_tool_turn(call.id, call.name, call.input, "")]
    second = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, messages=history, tools=tools
    )
    assert [b.type for b in second.content] == ["text", "tool_use"]
    assert second.content[0].text == "Reading it back."
    assert second.content[1].input == {"command": "cat /app/answer.txt"}

    history += _tool_turn(second.content[1].id, "Bash", second.content[1].input, "42\n")
    third = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=1024, messages=history, tools=tools
    )
    assert third.stop_reason == "end_turn"
    assert [b.type for b in third.content] == ["text"]
    assert third.content[0].text == "The answer file contains 42."


def test_stream_tool_call_and_text(
    client: anthropic.Anthropic, tools: list[dict[str, Any]]
) -> None:
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=1024, messages=[PROMPT], tools=tools
    ) as stream:
        events = [event.type for event in stream]
        message = stream.get_final_message()
    assert "message_start" in events and "message_stop" in events
    assert message.stop_reason == "tool_use"
    assert message.content[0].type == "tool_use"
    assert message.content[0].input == {"command": "echo 42 > /app/answer.txt"}
    assert message.usage.output_tokens > 0

    history = [
        PROMPT,
        *_tool_turn("t1", "Bash", {"command": "a"}, ""),
        *_tool_turn("t2", "Bash", {"command": "b"}, ""),
    ]
    with client.messages.stream(
        model="claude-sonnet-4-6", max_tokens=1024, messages=history, tools=tools
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "The answer file contains 42."
    assert final.stop_reason == "end_turn"


def test_multi_turn_text_step_advances_the_script(
    client: anthropic.Anthropic, tools: list[dict[str, Any]]
) -> None:
    history = [
        PROMPT,
        *_tool_turn("t1", "Bash", {"command": "a"}, ""),
        *_tool_turn("t2", "Bash", {"command": "b"}, ""),
        {"role": "assistant", "content": "The answer file contains 42."},
        {"role": "user", "content": "Anything else?"},
    ]
    reply = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=64, messages=history, tools=tools
    )
    # past the end of the script: the last text step again
    assert reply.content[0].text == "The answer file contains 42."


def test_side_request_without_tools_gets_the_title(
    client: anthropic.Anthropic, server: ModelServer
) -> None:
    reply = client.messages.create(
        model="claude-haiku-4-5",
        max_tokens=64,
        system=[
            {"type": "text", "text": "Write a 5-10 word title for the following conversation."}
        ],
        messages=[PROMPT],
    )
    assert reply.content[0].text == "Scripted session"
    assert server.requests[-1]["answer"] == "side"


def test_side_request_asking_for_json_fields(client: anthropic.Anthropic) -> None:
    system = (
        "Analyze if this message indicates a new conversation topic. Format your response as a JSON object "
        "with two fields: 'isNewTopic' (boolean) and 'title' (string, or null if isNewTopic is false)."
    )
    reply = client.messages.create(
        model="claude-haiku-4-5", max_tokens=64, system=system, messages=[PROMPT]
    )
    assert json.loads(reply.content[0].text) == {"isNewTopic": False, "title": "Scripted session"}


def test_count_tokens(client: anthropic.Anthropic, tools: list[dict[str, Any]]) -> None:
    count = client.messages.count_tokens(model="claude-sonnet-4-6", messages=[PROMPT], tools=tools)
    assert count.input_tokens > 10


def test_models_list(client: anthropic.Anthropic) -> None:
    ids = [m.id for m in client.models.list()]
    assert "claude-sonnet-4-6" in ids


def test_malformed_request_names_the_missing_field(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        client.post(
            "/v1/messages", body={"model": "claude-sonnet-4-6", "max_tokens": 5}, cast_to=object
        )
    assert "`messages` is required" in info.value.message
    assert info.value.body["error"]["type"] == "invalid_request_error"


def test_missing_shell_tool_is_a_clear_400(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        client.messages.create(
            model="claude-sonnet-4-6",
            max_tokens=64,
            messages=[PROMPT],
            tools=[
                {
                    "name": "Read",
                    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
                }
            ],
        )
    assert "script step 0" in info.value.message
    assert "offers no shell tool" in info.value.message
    assert "offered: Read" in info.value.message
