"""OpenAI Chat Completions wire format (`POST /v1/chat/completions`).

opencode reaches it through an `@ai-sdk/openai-compatible` provider; requests stream with
`stream_options.include_usage`, and tool calls stream as `delta.tool_calls`.
"""

from __future__ import annotations

import json
import time
from typing import Any

from benchflow.model_server.conversation import (
    Conversation,
    EventKind,
    Reply,
    RequestError,
    ToolSpec,
    progress_of,
    require,
    sse,
    stable_id,
    text_chunks,
    text_of,
    tool_list,
)

API = "openai-chat"


def parse_request(body: dict[str, Any]) -> Conversation:
    """The neutral view of a Chat Completions request body.

    Raises:
        RequestError: `messages` is missing or malformed.
    """
    messages = require(body, "messages", list, "the conversation as a list of {role, content}")
    events: list[EventKind] = []
    system: list[str] = []
    last_user = ""
    first_user: str | None = None
    user_texts: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise RequestError(f"`messages[{i}]` needs a `role`", param=f"messages[{i}]")
        role, content = message["role"], message.get("content")
        if role in ("system", "developer"):
            system.append(text_of(content))
        elif role in ("tool", "function"):
            events.append("tool_result")
        elif role == "assistant":
            if message.get("tool_calls") or message.get("function_call"):
                events.append("assistant_tool_call")
            if text_of(content).strip():
                events.append("assistant_text")
        else:
            events.append("user")
            last_user = text_of(content)
            first_user = last_user if first_user is None else first_user
            user_texts.append(last_user)
    schema, json_mode = _response_format(body.get("response_format"))
    options = body.get("stream_options") or {}
    return Conversation(
        api=API,
        model=str(body.get("model") or "gpt-scripted"),
        stream=bool(body.get("stream")),
        tools=_tools(body),
        progress=progress_of(events),
        user_texts=user_texts,
        events=events,
        system="\n".join(system),
        last_user_text=last_user,
        first_user_text=first_user or "",
        response_schema=schema,
        json_mode=json_mode,
        input_chars=len(json.dumps(body)),
        options={"include_usage": bool(isinstance(options, dict) and options.get("include_usage"))},
    )


def _tools(body: dict[str, Any]) -> list[ToolSpec]:
    tools = body.get("tools")
    if tools is None:
        functions = body.get("functions") or []
        tools = [{"type": "function", "function": f} for f in functions]
    tools = tool_list(tools)
    out = []
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RequestError(f"`tools[{i}].function.name` is required", param=f"tools[{i}]")
        params = function.get("parameters")
        out.append(ToolSpec(function["name"], params if isinstance(params, dict) else None))
    return out


def _response_format(fmt: Any) -> tuple[dict[str, Any] | None, bool]:
    if not isinstance(fmt, dict):
        return None, False
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        return (schema if isinstance(schema, dict) else {"type": "object"}), True
    return None, fmt.get("type") == "json_object"


def _completion_id(reply: Reply, conv: Conversation) -> str:
    return "chatcmpl-" + stable_id(API, conv.model, conv.progress, reply.summary())


def _usage(reply: Reply, conv: Conversation) -> dict[str, int]:
    return {
        "prompt_tokens": conv.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": conv.input_tokens + reply.output_tokens,
    }


def _finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.tool_call else "stop"


def render(reply: Reply, conv: Conversation) -> dict[str, Any]:
    """A plain Chat Completions response."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None, "refusal": None}
    if reply.tool_call:
        call = reply.tool_call
        message["tool_calls"] = [
            {
                "id": "call_" + call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
        ]
    elif message["content"] is None:
        message["content"] = ""
    return {
        "id": _completion_id(reply, conv),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": conv.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish_reason(reply),
                "logprobs": None,
            }
        ],
        "usage": _usage(reply, conv),
        "system_fingerprint": None,
    }


def render_events(reply: Reply, conv: Conversation) -> list[bytes]:
    """The SSE chunks of a streamed Chat Completions response, ending in `[DONE]`."""
    base = {
        "id": _completion_id(reply, conv),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": conv.model,
        "system_fingerprint": None,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(
            {
                **base,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
                ],
            }
        )

    # like the real API: content "" opens a text reply, null a pure tool-call reply
    opening = "" if reply.text or not reply.tool_call else None
    events = [chunk({"role": "assistant", "content": opening})]
    if reply.text:
        events.extend(chunk({"content": piece}) for piece in text_chunks(reply.text))
    if reply.tool_call:
        call = reply.tool_call
        raw = call.arguments_json
        cut = len(raw) // 2
        first = {
            "index": 0,
            "id": "call_" + call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        events.append(chunk({"tool_calls": [first]}))
        for part in (raw[:cut], raw[cut:]):
            events.append(chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}))
    events.append(chunk({}, _finish_reason(reply)))
    if conv.options.get("include_usage"):
        events.append(sse({**base, "choices": [], "usage": _usage(reply, conv)}))
    events.append(sse("[DONE]"))
    return events


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """An OpenAI-shaped error."""
    kind = "not_found_error" if status == 404 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}
