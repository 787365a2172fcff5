"""The Gemini wire format, parsed by the official `google-genai` SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from benchflow.model_server import ModelServer

MODEL = "gemini-2.5-pro"
PROMPT = types.Content(role="user", parts=[types.Part(text="Write 42 to /app/answer.txt")])


@pytest.fixture
def client(server: ModelServer) -> Iterator[genai.Client]:
    c = genai.Client(api_key="x", http_options=types.HttpOptions(base_url=server.url))
    yield c
    c.close()


@pytest.fixture
def config(schemas: dict[str, dict[str, Any]]) -> types.GenerateContentConfig:
    shell = types.FunctionDeclaration(
        name="run_shell_command", description="run", parameters_json_schema=schemas["gemini"]
    )
    read = types.FunctionDeclaration(
        name="read_file",
        parameters=types.Schema(
            type=types.Type.OBJECT, properties={"path": types.Schema(type=types.Type.STRING)}
        ),
    )
    return types.GenerateContentConfig(
        system_instruction="You are gemini-cli.",
        tools=[types.Tool(function_declarations=[read, shell])],
    )


def _tool_turn(args: dict[str, Any], output: str) -> list[types.Content]:
    return [
        types.Content(
            role="model",
            parts=[
                types.Part(function_call=types.FunctionCall(name="run_shell_command", args=args))
            ],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        name="run_shell_command", response={"output": output}
                    )
                )
            ],
        ),
    ]


def test_generate_content_tool_call_round_trips(
    client: genai.Client, config: types.GenerateContentConfig
) -> None:
    first = client.models.generate_content(model=MODEL, contents=[PROMPT], config=config)
    (call,) = first.function_calls
    assert call.name == "run_shell_command"
    assert call.args == {"command": "echo 42 > /app/answer.txt"}
    assert first.candidates[0].finish_reason == types.FinishReason.STOP
    assert first.usage_metadata.total_token_count > 0

    history = [PROMPT, *_tool_turn(call.args, "")]
    second = client.models.generate_content(model=MODEL, contents=history, config=config)
    assert second.candidates[0].content.parts[0].text == "Reading it back."
    assert second.function_calls[0].args == {"command": "cat /app/answer.txt"}

    history += _tool_turn(second.function_calls[0].args, "42")
    third = client.models.generate_content(model=MODEL, contents=history, config=config)
    assert third.function_calls is None
    assert third.text == "The answer file contains 42."


def test_stream_generate_content(client: genai.Client, config: types.GenerateContentConfig) -> None:
    chunks = list(
        client.models.generate_content_stream(model=MODEL, contents=[PROMPT], config=config)
    )
    calls = [c for chunk in chunks for c in (chunk.function_calls or [])]
    assert [c.args["command"] for c in calls] == ["echo 42 > /app/answer.txt"]
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP

    history = [PROMPT, *_tool_turn({}, ""), *_tool_turn({}, "")]
    chunks = list(
        client.models.generate_content_stream(model=MODEL, contents=history, config=config)
    )
    assert len(chunks) > 1
    assert "".join(chunk.text or "" for chunk in chunks) == "The answer file contains 42."


def test_count_tokens(client: genai.Client) -> None:
    count = client.models.count_tokens(model=MODEL, contents=[PROMPT])
    assert count.total_tokens > 0


def test_complexity_router_gets_a_valid_score(client: genai.Client) -> None:
    schema = {
        "type": "object",
        "properties": {
            "complexity_reasoning": {"type": "string"},
            "complexity_score": {"type": "integer", "minimum": 1, "maximum": 100},
        },
        "required": ["complexity_reasoning", "complexity_score"],
    }
    reply = client.models.generate_content(
        model="gemini-2.5-flash-lite",
        contents=[PROMPT],
        config=types.GenerateContentConfig(
            response_mime_type="application/json", response_json_schema=schema
        ),
    )
    answer = json.loads(reply.text)
    assert answer["complexity_score"] >= 1 and isinstance(answer["complexity_reasoning"], str)


def test_next_speaker_check_ends_the_turn(client: genai.Client) -> None:
    schema = types.Schema(
        type=types.Type.OBJECT,
        properties={
            "reasoning": types.Schema(type=types.Type.STRING),
            "next_speaker": types.Schema(type=types.Type.STRING, enum=["model", "user"]),
        },
        required=["reasoning", "next_speaker"],
    )
    reply = client.models.generate_content(
        model=MODEL,
        contents=[PROMPT],
        config=types.GenerateContentConfig(
            response_mime_type="application/json", response_schema=schema
        ),
    )
    assert json.loads(reply.text)["next_speaker"] == "user"


def test_malformed_request_names_the_missing_field(
    server: ModelServer, client: genai.Client
) -> None:
    with pytest.raises(errors.ClientError) as info:
        client.models.generate_content(
            model=MODEL,
            contents=[PROMPT],
            config={"http_options": {"extra_body": {"contents": None}}},
        )
    assert info.value.code == 400
    assert "`contents`" in info.value.message
    assert server.requests[-1]["status"] == 400


def test_models_list(client: genai.Client) -> None:
    names = [m.name for m in client.models.list()]
    assert "models/gemini-2.5-pro" in names


def test_models_get(client: genai.Client) -> None:
    assert client.models.get(model="gemini-2.5-flash").name == "models/gemini-2.5-flash"
