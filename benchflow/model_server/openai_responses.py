"""OpenAI Responses wire format (`POST /v1/responses`, plain and SSE).

codex reaches it through a custom model provider with `wire_api = "responses"`; it sends
the whole conversation as `input` items every time (`store = false`) and streams.
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
    qualified_name,
    require,
    sse,
    stable_id,
    text_chunks,
    text_of,
    tool_list,
)
from benchflow.model_server.openai_chat import error_body

__all__ = ["error_body", "parse_request", "render", "render_events"]

API = "openai-responses"

_CALL_ITEMS = ("function_call", "local_shell_call", "custom_tool_call", "shell_call")
_RESULT_ITEMS = (
    "function_call_output",
    "local_shell_call_output",
    "custom_tool_call_output",
    "shell_call_output",
)


def parse_request(body: dict[str, Any]) -> Conversation:
    """The neutral view of a Responses request body.

    Raises:
        RequestError: `input` is missing, or the request relies on server-side state.
    """
    items = require(
        body, "input", (list, str), "the conversation as a string or a list of input items"
    )
    if body.get("previous_response_id"):
        raise RequestError(
            "`previous_response_id` is not supported: the scripted server keeps no state; send the whole "
            "conversation in `input` (codex: store = false)",
            param="previous_response_id",
        )
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    events: list[EventKind] = []
    system = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
    last_user = ""
    first_user: str | None = None
    user_texts: list[str] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise RequestError(f"`input[{i}]` must be an object", param=f"input[{i}]")
        kind = item.get("type", "message")
        if kind in _CALL_ITEMS:
            events.append("assistant_tool_call")
        elif kind in _RESULT_ITEMS:
            events.append("tool_result")
        elif kind == "message":
            role, content = item.get("role"), item.get("content")
            if role == "assistant":
                if text_of(content).strip():
                    events.append("assistant_text")
            elif role in ("system", "developer"):
                system.append(text_of(content))
            else:
                events.append("user")
                last_user = text_of(content)
                first_user = last_user if first_user is None else first_user
                user_texts.append(last_user)
    schema, json_mode = _text_format(body.get("text"))
    return Conversation(
        api=API,
        model=str(body.get("model") or "gpt-scripted"),
        stream=bool(body.get("stream")),
        tools=_tools(body.get("tools")),
        progress=progress_of(events),
        user_texts=user_texts,
        events=events,
        system="\n".join(system),
        last_user_text=last_user,
        first_user_text=first_user or "",
        response_schema=schema,
        json_mode=json_mode,
        input_chars=len(json.dumps(body)),
    )


def _tools(tools: Any, namespace: str | None = None, where: str = "tools") -> list[ToolSpec]:
    out = []
    for i, tool in enumerate(tool_list(tools)):
        if not isinstance(tool, dict):
            raise RequestError(f"`{where}[{i}]` must be an object", param=f"{where}[{i}]")
        kind = tool.get("type", "function")
        if kind == "namespace" and namespace is None:
            # a group of tools (codex: one per MCP server), each called by its own name
            # with the group's `namespace` beside it
            name = tool.get("name")
            if not isinstance(name, str) or not name:
                raise RequestError(f"`{where}[{i}].name` is required for a namespace tool",
                                   param=f"{where}[{i}]")
            out.extend(_tools(tool.get("tools"), name, f"{where}[{i}].tools"))
        elif kind == "local_shell":
            out.append(ToolSpec("local_shell", None, "local_shell", kind))
        elif kind == "function":
            if not isinstance(tool.get("name"), str):
                raise RequestError(
                    f"`{where}[{i}].name` is required for a function tool", param=f"{where}[{i}]"
                )
            params = tool.get("parameters")
            out.append(
                ToolSpec(
                    qualified_name(namespace, tool["name"]),
                    params if isinstance(params, dict) else None, "function", kind, namespace,
                )
            )
        else:
            out.append(
                ToolSpec(
                    qualified_name(namespace, str(tool.get("name") or kind)),
                    None,
                    "custom" if kind == "custom" else kind,
                    kind,
                    namespace,
                )
            )
    return out


def _text_format(text: Any) -> tuple[dict[str, Any] | None, bool]:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict):
        return None, False
    if fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        return (schema if isinstance(schema, dict) else {"type": "object"}), True
    return None, fmt.get("type") == "json_object"


def _ids(reply: Reply, conv: Conversation) -> str:
    return stable_id(API, conv.model, conv.progress, reply.summary())


def _output(reply: Reply, conv: Conversation) -> list[dict[str, Any]]:
    key = _ids(reply, conv)
    items: list[dict[str, Any]] = []
    if reply.text or not reply.tool_call:
        items.append(
            {
                "type": "message",
                "id": "msg_" + key,
                "status": "completed",
                "role": "assistant",
                "content": [
                    {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
                ],
            }
        )
    call = reply.tool_call
    if call and call.kind == "local_shell":
        action = {
            "type": "exec",
            "command": call.arguments["command"],
            "env": {},
            "timeout_ms": None,
        }
        items.append(
            {
                "type": "local_shell_call",
                "id": "lsh_" + key,
                "call_id": "call_" + call.call_id,
                "status": "completed",
                "action": action,
            }
        )
    elif call:
        items.append(
            {
                "type": "function_call",
                "id": "fc_" + key,
                "call_id": "call_" + call.call_id,
                "name": call.member,
                **({"namespace": call.namespace} if call.namespace else {}),
                "arguments": call.arguments_json,
                "status": "completed",
            }
        )
    return items


def _response(
    reply: Reply, conv: Conversation, output: list[dict[str, Any]], status: str
) -> dict[str, Any]:
    done = status == "completed"
    usage = {
        "input_tokens": conv.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": conv.input_tokens + reply.output_tokens,
    }
    return {
        "id": "resp_" + _ids(reply, conv),
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": conv.model,
        "output": output,
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "text": {"format": {"type": "text"}},
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "temperature": 1.0,
        "top_p": 1.0,
        "usage": usage if done else None,
    }


def render(reply: Reply, conv: Conversation) -> dict[str, Any]:
    """A plain Responses response."""
    return _response(reply, conv, _output(reply, conv), "completed")


def render_events(reply: Reply, conv: Conversation) -> list[bytes]:
    """The SSE events of a streamed response, ending in `response.completed`."""
    seq = 0
    events: list[bytes] = []

    def emit(kind: str, **fields: Any) -> None:
        nonlocal seq
        events.append(sse({"type": kind, "sequence_number": seq, **fields}, kind))
        seq += 1

    emit("response.created", response=_response(reply, conv, [], "in_progress"))
    emit("response.in_progress", response=_response(reply, conv, [], "in_progress"))
    output = _output(reply, conv)
    for index, item in enumerate(output):
        if item["type"] == "message":
            part = item["content"][0]
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "content": []},
            )
            emit(
                "response.content_part.added",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part={**part, "text": ""},
            )
            for piece in text_chunks(part["text"]):
                emit(
                    "response.output_text.delta",
                    item_id=item["id"],
                    output_index=index,
                    content_index=0,
                    delta=piece,
                    logprobs=[],
                )
            emit(
                "response.output_text.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                text=part["text"],
                logprobs=[],
            )
            emit(
                "response.content_part.done",
                item_id=item["id"],
                output_index=index,
                content_index=0,
                part=part,
            )
        elif item["type"] == "function_call":
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            raw = item["arguments"]
            cut = len(raw) // 2
            for part_text in (raw[:cut], raw[cut:]):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=part_text,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                name=item["name"],
                arguments=raw,
            )
        else:
            emit(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress"},
            )
        emit("response.output_item.done", output_index=index, item=item)
    emit("response.completed", response=_response(reply, conv, output, "completed"))
    return events
