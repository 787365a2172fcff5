"""Gemini wire format (`models/{model}:generateContent`, `:streamGenerateContent?alt=sse`, `:countTokens`).

gemini-cli reaches it through `GOOGLE_GEMINI_BASE_URL`. Its main loop streams; its
side requests (complexity router, next-speaker check) call `generateContent` with a
`responseJsonSchema` and get a valid instance of it.
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
    tool_list,
)

API = "gemini"


def _get(obj: dict[str, Any], camel: str) -> Any:
    """A field by its camelCase name or its snake_case twin (the Python SDK may send either)."""
    if camel in obj:
        return obj[camel]
    snake = "".join("_" + c.lower() if c.isupper() else c for c in camel)
    return obj.get(snake)


def _parts_text(parts: Any, *, skip_thoughts: bool = True) -> str:
    if not isinstance(parts, list):
        return ""
    return "\n".join(
        p["text"]
        for p in parts
        if isinstance(p, dict)
        and isinstance(p.get("text"), str)
        and not (skip_thoughts and p.get("thought"))
    )


def parse_request(body: dict[str, Any], model: str, *, stream: bool) -> Conversation:
    """The neutral view of a generateContent request body for `model`.

    Raises:
        RequestError: `contents` is missing or malformed.
    """
    contents = require(body, "contents", list, "the conversation as a list of {role, parts}")
    events: list[EventKind] = []
    last_user = ""
    first_user: str | None = None
    user_texts: list[str] = []
    for i, content in enumerate(contents):
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            raise RequestError(f"`contents[{i}].parts` must be a list", param=f"contents[{i}]")
        parts = [p for p in content["parts"] if isinstance(p, dict)]
        if content.get("role") == "model":
            if any(_get(p, "functionCall") for p in parts):
                events.append("assistant_tool_call")
            if _parts_text(parts).strip():
                events.append("assistant_text")
            continue
        results = sum(1 for p in parts if _get(p, "functionResponse"))
        events.extend(["tool_result"] * results)
        text = _parts_text(parts)
        if text.strip() or not results:
            events.append("user")
            last_user = text
            first_user = last_user if first_user is None else first_user
            user_texts.append(last_user)
    system = _get(body, "systemInstruction")
    if isinstance(system, str):
        system_text = system
    elif isinstance(system, dict):
        system_text = _parts_text(system.get("parts"))
    else:
        system_text = ""
    config = _get(body, "generationConfig") or {}
    schema = _get(config, "responseJsonSchema") or _get(config, "responseSchema")
    return Conversation(
        api=API,
        model=model,
        stream=stream,
        tools=_tools(body.get("tools")),
        progress=progress_of(events),
        user_texts=user_texts,
        events=events,
        system=system_text,
        last_user_text=last_user,
        first_user_text=first_user or "",
        response_schema=schema if isinstance(schema, dict) else None,
        json_mode=_get(config, "responseMimeType") == "application/json",
        input_chars=len(json.dumps(body)),
    )


def _tools(tools: Any) -> list[ToolSpec]:
    out = []
    for i, tool in enumerate(tool_list(tools)):
        declarations = _get(tool, "functionDeclarations") if isinstance(tool, dict) else None
        for j, decl in enumerate(declarations or []):
            if not isinstance(decl, dict) or not isinstance(decl.get("name"), str):
                raise RequestError(
                    f"`tools[{i}].functionDeclarations[{j}].name` is required", param=f"tools[{i}]"
                )
            params = _get(decl, "parametersJsonSchema") or decl.get("parameters")
            out.append(ToolSpec(decl["name"], params if isinstance(params, dict) else None))
    return out


def count_tokens(body: dict[str, Any], model: str) -> dict[str, Any]:
    """The `countTokens` answer; accepts `contents` or a wrapped `generateContentRequest`."""
    inner = _get(body, "generateContentRequest")
    conv = parse_request(inner if isinstance(inner, dict) else body, model, stream=False)
    return {"totalTokens": conv.input_tokens}


def _parts(reply: Reply) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    if reply.text or not reply.tool_call:
        parts.append({"text": reply.text})
    if reply.tool_call:
        parts.append(
            {"functionCall": {"name": reply.tool_call.name, "args": reply.tool_call.arguments}}
        )
    return parts


def _response(
    reply: Reply, conv: Conversation, parts: list[dict[str, Any]], finished: bool
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finished:
        candidate["finishReason"] = "STOP"
    out_tokens = reply.output_tokens
    return {
        "candidates": [candidate],
        "usageMetadata": {
            "promptTokenCount": conv.input_tokens,
            "candidatesTokenCount": out_tokens,
            "totalTokenCount": conv.input_tokens + out_tokens,
        },
        "modelVersion": conv.model,
        "responseId": stable_id(API, conv.model, conv.progress, reply.summary()),
    }


def render(reply: Reply, conv: Conversation) -> dict[str, Any]:
    """A plain generateContent response."""
    return _response(reply, conv, _parts(reply), finished=True)


def render_events(reply: Reply, conv: Conversation) -> list[bytes]:
    """The SSE chunks of streamGenerateContent: text in pieces, the function call whole, then STOP."""
    chunks: list[list[dict[str, Any]]] = []
    if reply.text:
        chunks.extend([{"text": piece}] for piece in text_chunks(reply.text))
    if reply.tool_call or not chunks:
        chunks.append([p for p in _parts(reply) if "functionCall" in p] or [{"text": ""}])
    last = len(chunks) - 1
    return [
        sse(_response(reply, conv, parts, finished=i == last)) for i, parts in enumerate(chunks)
    ]


def error_body(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """A Google-shaped error."""
    state = {
        400: "INVALID_ARGUMENT",
        401: "UNAUTHENTICATED",
        404: "NOT_FOUND",
        415: "INVALID_ARGUMENT",
    }
    return {
        "error": {
            "code": status,
            "message": message,
            "status": state.get(status, "FAILED_PRECONDITION"),
        }
    }
