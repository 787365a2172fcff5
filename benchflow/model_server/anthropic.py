"""Anthropic Messages wire format (`POST /v1/messages`, `/v1/messages/count_tokens`).

Claude Code reaches it through `ANTHROPIC_BASE_URL`; requests stream (SSE) and side
requests (titles, topic detection) offer no tools.
"""

from __future__ import annotations

import json
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

API = "anthropic"


def parse_request(body: dict[str, Any]) -> Conversation:
    """The neutral view of a Messages request body.

    Raises:
        RequestError: `messages` is missing or malformed.
    """
    messages = require(body, "messages", list, "the conversation as a list of {role, content}")
    events: list[EventKind] = []
    last_user = ""
    first_user: str | None = None
    user_texts: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or "role" not in message:
            raise RequestError(
                f"`messages[{i}]` needs a `role` and `content`", param=f"messages[{i}]"
            )
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message["role"] == "assistant":
            if any(
                isinstance(b, dict) and b.get("type") in ("tool_use", "server_tool_use")
                for b in blocks
            ):
                events.append("assistant_tool_call")
            if text_of(content).strip():
                events.append("assistant_text")
            continue
        results = sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result")
        events.extend(["tool_result"] * results)
        text = text_of(content)
        if text.strip() or not results:
            events.append("user")
            last_user = text
            first_user = last_user if first_user is None else first_user
            user_texts.append(last_user)
    schema, json_mode = _output_format(body)
    return Conversation(
        api=API,
        model=str(body.get("model") or "claude-scripted"),
        stream=bool(body.get("stream")),
        tools=_tools(body.get("tools")),
        progress=progress_of(events),
        user_texts=user_texts,
        events=events,
        system=text_of(body.get("system")),
        last_user_text=last_user,
        first_user_text=first_user or "",
        response_schema=schema,
        json_mode=json_mode,
        input_chars=len(json.dumps(body)),
    )


def _tools(tools: Any) -> list[ToolSpec]:
    out = []
    for i, tool in enumerate(tool_list(tools)):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise RequestError(f"`tools[{i}]` needs a `name`", param=f"tools[{i}]")
        schema = tool.get("input_schema")
        kind = "function" if isinstance(schema, dict) else "builtin"
        out.append(
            ToolSpec(
                tool["name"], schema if isinstance(schema, dict) else None, kind, tool.get("type")
            )
        )
    return out


def _output_format(body: dict[str, Any]) -> tuple[dict[str, Any] | None, bool]:
    fmt = body.get("output_format") or (body.get("output_config") or {}).get("format")
    if (
        isinstance(fmt, dict)
        and fmt.get("type") == "json_schema"
        and isinstance(fmt.get("schema"), dict)
    ):
        return fmt["schema"], True
    return None, False


def count_tokens(body: dict[str, Any]) -> dict[str, Any]:
    """The `count_tokens` answer for a request body."""
    conv = parse_request(body)
    return {"input_tokens": conv.input_tokens}


def _content(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.text or not reply.tool_call:
        blocks.append({"type": "text", "text": reply.text})
    if reply.tool_call:
        call = reply.tool_call
        blocks.append(
            {
                "type": "tool_use",
                "id": "toolu_" + call.call_id,
                "name": call.name,
                "input": call.arguments,
            }
        )
    return blocks


def _usage(conv: Conversation, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": conv.input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _message(
    reply: Reply, conv: Conversation, content: list[dict[str, Any]], stop: str | None, out: int
) -> dict:
    return {
        "id": "msg_" + stable_id(API, conv.model, conv.progress, reply.summary()),
        "type": "message",
        "role": "assistant",
        "model": conv.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _usage(conv, out),
    }


def _stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.tool_call else "end_turn"


def render(reply: Reply, conv: Conversation) -> dict[str, Any]:
    """A plain (non-streaming) Messages response."""
    return _message(reply, conv, _content(reply), _stop_reason(reply), reply.output_tokens)


def render_events(reply: Reply, conv: Conversation) -> list[bytes]:
    """The SSE events of a streamed Messages response."""
    events = [
        sse(
            {"type": "message_start", "message": _message(reply, conv, [], None, 1)},
            "message_start",
        ),
        sse({"type": "ping"}, "ping"),
    ]
    for index, block in enumerate(_content(reply)):
        if block["type"] == "text":
            start = {**block, "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in text_chunks(block["text"])]
        else:
            start = {**block, "input": {}}
            raw = json.dumps(block["input"], ensure_ascii=False)
            cut = len(raw) // 2
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in (raw[:cut], raw[cut:])
            ]
        events.append(
            sse(
                {"type": "content_block_start", "index": index, "content_block": start},
                "content_block_start",
            )
        )
        for delta in deltas:
            events.append(
                sse(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            )
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    message_delta = {
        "type": "message_delta",
        "delta": {"stop_reason": _stop_reason(reply), "stop_sequence": None},
        "usage": {"output_tokens": reply.output_tokens},
    }
    events.append(sse(message_delta, "message_delta"))
    events.append(sse({"type": "message_stop"}, "message_stop"))
    return events


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """An Anthropic-shaped error."""
    kind = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error"}.get(
        status, "invalid_request_error"
    )
    return {"type": "error", "error": {"type": kind, "message": message}}
