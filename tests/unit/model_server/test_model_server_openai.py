"""OpenAI Chat Completions and Responses wire formats, parsed by the official `openai` SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from benchflow.model_server import ModelServer

PROMPT = {"role": "user", "content": "Write 42 to /app/answer.txt"}


@pytest.fixture
def client(server: ModelServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0) as c:
        yield c


@pytest.fixture
def chat_tools(schemas: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    read = {
        "type": "object",
        "properties": {"filePath": {"type": "string"}},
        "required": ["filePath"],
    }
    return [
        {"type": "function", "function": {"name": "read", "parameters": read}},
        {
            "type": "function",
            "function": {"name": "bash", "description": "run", "parameters": schemas["opencode"]},
        },
    ]


def _chat_tool_turn(call_id: str, args: dict[str, Any], output: str) -> list[dict[str, Any]]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps(args)},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def test_chat_plain_tool_call_round_trips(
    client: openai.OpenAI, chat_tools: list[dict[str, Any]]
) -> None:
    first = client.chat.completions.create(model="gpt-5", messages=[PROMPT], tools=chat_tools)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.function.name == "bash"
    args = json.loads(call.function.arguments)
    assert args["command"] == "echo 42 > /app/answer.txt"
    assert args["description"]  # opencode's bash requires a description
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens

    history = [PROMPT, *_chat_tool_turn(call.id, args, "")]
    second = client.chat.completions.create(model="gpt-5", messages=history, tools=chat_tools)
    assert second.choices[0].message.content == "Reading it back."
    assert (
        json.loads(second.choices[0].message.tool_calls[0].function.arguments)["command"]
        == "cat /app/answer.txt"
    )

    history += _chat_tool_turn(
        second.choices[0].message.tool_calls[0].id, {"command": "cat"}, "42\n"
    )
    third = client.chat.completions.create(model="gpt-5", messages=history, tools=chat_tools)
    assert third.choices[0].finish_reason == "stop"
    assert third.choices[0].message.content == "The answer file contains 42."
    assert third.choices[0].message.tool_calls is None


def test_chat_stream_tool_call(client: openai.OpenAI, chat_tools: list[dict[str, Any]]) -> None:
    stream = client.chat.completions.create(
        model="gpt-5",
        messages=[PROMPT],
        tools=chat_tools,
        stream=True,
        stream_options={"include_usage": True},
    )
    calls: dict[int, dict[str, str]] = {}
    finish, usage = None, None
    with stream:
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                for delta in choice.delta.tool_calls or []:
                    entry = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                    entry["id"] += delta.id or ""
                    entry["name"] += (delta.function.name or "") if delta.function else ""
                    entry["arguments"] += (delta.function.arguments or "") if delta.function else ""
    assert finish == "tool_calls"
    assert calls[0]["name"] == "bash" and calls[0]["id"].startswith("call_")
    assert json.loads(calls[0]["arguments"])["command"] == "echo 42 > /app/answer.txt"
    assert usage is not None and usage.completion_tokens > 0


def test_chat_stream_helper_accumulates_text(
    client: openai.OpenAI, chat_tools: list[dict[str, Any]]
) -> None:
    history = [PROMPT, *_chat_tool_turn("c1", {}, ""), *_chat_tool_turn("c2", {}, "")]
    with client.chat.completions.stream(
        model="gpt-5", messages=history, tools=chat_tools
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "The answer file contains 42."
    assert final.choices[0].finish_reason == "stop"


def test_chat_side_request_and_json_schema(client: openai.OpenAI) -> None:
    title = client.chat.completions.create(
        model="gpt-5-mini",
        messages=[{"role": "system", "content": "You are a title generator."}, PROMPT],
    )
    assert title.choices[0].message.content == "Scripted session"
    schema = {
        "type": "object",
        "properties": {
            "done": {"type": "boolean"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["done", "confidence"],
        "additionalProperties": False,
    }
    structured = client.chat.completions.create(
        model="gpt-5",
        messages=[PROMPT],
        response_format={"type": "json_schema", "json_schema": {"name": "check", "schema": schema}},
    )
    assert json.loads(structured.choices[0].message.content) == {"done": False, "confidence": 0}


def test_chat_malformed_request_names_the_missing_field(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.post("/chat/completions", body={"model": "gpt-5"}, cast_to=object)
    assert "`messages` is required" in info.value.message
    assert info.value.param == "messages"


@pytest.fixture
def codex_tools(schemas: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "name": "shell",
            "description": "run",
            "strict": False,
            "parameters": schemas["codex_shell"],
        },
        {
            "type": "custom",
            "name": "apply_patch",
            "description": "patch",
            "format": {"type": "text"},
        },
    ]


def _responses_turn(call_id: str, args: dict[str, Any], output: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "function_call",
            "call_id": call_id,
            "name": "shell",
            "arguments": json.dumps(args),
        },
        {"type": "function_call_output", "call_id": call_id, "output": output},
    ]


CODEX_INPUT = [
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "<permissions/>"}],
    },
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Write 42 to /app/answer.txt"}],
    },
]


def test_responses_plain_tool_call_round_trips(
    client: openai.OpenAI, codex_tools: list[dict[str, Any]]
) -> None:
    first = client.responses.create(
        model="gpt-5-codex", instructions="You are codex.", input=CODEX_INPUT, tools=codex_tools
    )
    assert first.status == "completed"
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "shell"
    assert json.loads(call.arguments) == {"command": ["bash", "-lc", "echo 42 > /app/answer.txt"]}
    assert first.usage.total_tokens > 0

    history = [*CODEX_INPUT, *_responses_turn(call.call_id, json.loads(call.arguments), "")]
    second = client.responses.create(model="gpt-5-codex", input=history, tools=codex_tools)
    assert second.output_text == "Reading it back."
    assert json.loads(second.output[1].arguments)["command"][-1] == "cat /app/answer.txt"

    history += [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Reading it back."}],
        },
        *_responses_turn(second.output[1].call_id, {}, "42\n"),
    ]
    third = client.responses.create(model="gpt-5-codex", input=history, tools=codex_tools)
    assert [item.type for item in third.output] == ["message"]
    assert third.output_text == "The answer file contains 42."


def test_responses_stream(client: openai.OpenAI, codex_tools: list[dict[str, Any]]) -> None:
    with client.responses.stream(
        model="gpt-5-codex", input=CODEX_INPUT, tools=codex_tools
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert "response.function_call_arguments.delta" in kinds
    call = final.output[0]
    assert call.type == "function_call"
    assert json.loads(call.arguments)["command"][-1] == "echo 42 > /app/answer.txt"

    history = [*CODEX_INPUT, *_responses_turn("c1", {}, ""), *_responses_turn("c2", {}, "")]
    raw = client.responses.create(
        model="gpt-5-codex", input=history, tools=codex_tools, stream=True
    )
    with raw:
        text = "".join(event.delta for event in raw if event.type == "response.output_text.delta")
    assert text == "The answer file contains 42."


def test_responses_exec_command_and_local_shell(
    client: openai.OpenAI, schemas: dict[str, dict[str, Any]]
) -> None:
    exec_tool = {"type": "function", "name": "exec_command", "parameters": schemas["codex_exec"]}
    reply = client.responses.create(model="gpt-5-codex", input=CODEX_INPUT, tools=[exec_tool])
    assert json.loads(reply.output[0].arguments) == {"cmd": "echo 42 > /app/answer.txt"}

    local = client.responses.create(
        model="gpt-5-codex", input=CODEX_INPUT, tools=[{"type": "local_shell"}]
    )
    item = local.output[0]
    assert item.type == "local_shell_call"
    assert item.action.command == ["bash", "-lc", "echo 42 > /app/answer.txt"]


def test_responses_malformed_and_stateful_requests_are_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client.post("/responses", body={"model": "gpt-5-codex"}, cast_to=object)
    assert "`input` is required" in info.value.message
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(model="gpt-5-codex", input="hi", previous_response_id="resp_1")
    assert "previous_response_id" in info.value.message


def test_models_list(client: openai.OpenAI) -> None:
    assert "gpt-5-codex" in [m.id for m in client.models.list()]
    assert client.models.retrieve("gpt-5").id == "gpt-5"


def test_responses_namespace_tools_are_called_by_member_and_namespace(
    tmp_path: Any, codex_tools: list[dict[str, Any]]
) -> None:
    # codex offers each MCP server's tools as one `namespace` tool; the model calls a
    # member by its own name with the namespace beside it (stream and plain alike)
    from benchflow.model_server import parse_script

    script = parse_script({"steps": [
        {"tool": "*benchflow*web_search", "args": {"query": "cat"}}, {"text": "keeper.md"}]})
    search = {"type": "function", "name": "web_search", "strict": False,
              "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}
    tools = [*codex_tools, {"type": "web_search"},
             {"type": "namespace", "name": "mcp__benchflow", "description": "MCP tools",
              "tools": [search]}]
    with ModelServer(script, host="127.0.0.1", port=0, log_dir=tmp_path) as srv, \
            openai.OpenAI(base_url=srv.url + "/v1", api_key="x", max_retries=0) as client:
        plain = client.responses.create(model="gpt-5-codex", input=CODEX_INPUT, tools=tools)
        with client.responses.stream(model="gpt-5-codex", input=CODEX_INPUT,
                                     tools=tools) as stream:
            streamed = stream.get_final_response()
        history = [*CODEX_INPUT, {"type": "function_call", "call_id": "c1", "name": "web_search",
                                  "namespace": "mcp__benchflow", "arguments": "{}"},
                   {"type": "function_call_output", "call_id": "c1", "output": "1. keeper.md"}]
        answer = client.responses.create(model="gpt-5-codex", input=history, tools=tools)
    for reply in (plain, streamed):
        (call,) = [item for item in reply.output if item.type == "function_call"]
        assert (call.name, call.namespace, json.loads(call.arguments)) == (
            "web_search", "mcp__benchflow", {"query": "cat"})
    assert answer.output_text == "keeper.md"
    logged = [json.loads(line)["summary"] for line in
              (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert logged[0]["tool"] == "mcp__benchflow__web_search"
    assert "mcp__benchflow__web_search" in logged[0]["tools"] and "web_search" in logged[0]["tools"]


def test_a_bad_namespace_tool_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match=r"`tools\[0\].tools\[0\].name` is required"):
        client.responses.create(model="gpt-5-codex", input=CODEX_INPUT, tools=[
            {"type": "namespace", "name": "mcp__x", "tools": [{"type": "function"}]}])
