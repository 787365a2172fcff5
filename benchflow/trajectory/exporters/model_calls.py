"""SFT examples from captured model calls (`model_calls.jsonl`): exactly what the model saw.

Each successful model call becomes one example in OpenAI chat form: the request's
conversation (and `tools`) plus the reply as the final assistant message. OpenAI Chat
Completions calls are taken as they are; Anthropic Messages (system, text, tool_use ->
`tool_calls`, tool_result -> `tool` messages), OpenAI Responses (`instructions`, input
items, function / custom / local-shell calls and their outputs, streamed or not) and
Gemini (`systemInstruction`, `contents` parts, functionCall / functionResponse) are
converted. Anything else (token counting, model listings, failed calls) is skipped and
counted by reason (`skipped`). Token ids and log-probabilities, when captured, ride along in
the example's `call` metadata, aligned with the assistant reply.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchflow.model_server.wire import api_of

_TOKEN_KEYS = ("usage", "prompt_token_ids", "completion_token_ids", "logprobs",
               "logprob_tokens", "prompt_logprobs")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content
                       if isinstance(b, dict) and b.get("type") in ("text", "input_text",
                                                                    "output_text"))
    return ""


def _anthropic_messages(request: dict[str, Any], reply: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    system = _text(request.get("system"))
    if system:
        out.append({"role": "system", "content": system})
    for message in [*request.get("messages", []), {"role": "assistant", **reply}]:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        if message.get("role") == "assistant":
            calls = [{"id": b.get("id"), "type": "function",
                      "function": {"name": b.get("name"),
                                   "arguments": json.dumps(b.get("input") or {})}}
                     for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            entry: dict[str, Any] = {"role": "assistant", "content": _text(blocks)}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
            continue
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append({"role": "tool", "tool_call_id": block.get("tool_use_id"),
                            "content": _text(block.get("content"))})
        text = _text([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"])
        if text:
            out.append({"role": "user", "content": text})
    return out


def _openai_tools_from_anthropic(tools: Any) -> list[dict[str, Any]] | None:
    if not isinstance(tools, list):
        return None
    return [{"type": "function", "function": {"name": t.get("name"),
                                              "description": t.get("description", ""),
                                              "parameters": t.get("input_schema", {})}}
            for t in tools if isinstance(t, dict)]


def _responses_messages(request: dict[str, Any], reply: Any) -> list[dict[str, Any]]:
    """A Responses API call as chat messages: instructions, input items, then the reply's
    output items."""
    out: list[dict[str, Any]] = []
    if isinstance(request.get("instructions"), str) and request["instructions"]:
        out.append({"role": "system", "content": request["instructions"]})
    items = request.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    output = reply.get("output") if isinstance(reply, dict) else None
    _responses_items(out, items if isinstance(items, list) else [])
    start = len(out)
    _responses_items(out, output if isinstance(output, list) else [])
    if len(out) == start or out[-1].get("role") != "assistant":
        out.append({"role": "assistant", "content": ""})
    return out


def _assistant(out: list[dict[str, Any]]) -> dict[str, Any]:
    if not out or out[-1].get("role") != "assistant" or any(
            m.get("role") == "tool" for m in out[-1:]):
        out.append({"role": "assistant", "content": ""})
    return out[-1]


def _responses_items(out: list[dict[str, Any]], items: list[Any]) -> None:
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = str(item.get("type", "message"))
        if kind == "message":
            role = {"developer": "system"}.get(str(item.get("role")), str(item.get("role")))
            text = _text(item.get("content"))
            if role == "assistant":
                message = _assistant(out)
                message["content"] = (message["content"] or "") + text
            else:
                out.append({"role": role, "content": text})
        elif kind.endswith("_output"):
            value = item.get("output")
            out.append({"role": "tool", "tool_call_id": item.get("call_id"),
                        "content": value if isinstance(value, str) else _text(value)
                        or json.dumps(value, ensure_ascii=False)})
        elif kind.endswith("call"):
            args = item.get("arguments")
            if not isinstance(args, str):
                value = item.get("input", item.get("action"))
                args = value if isinstance(value, str) and kind == "custom_tool_call" \
                    else json.dumps(value if value is not None else {}, ensure_ascii=False)
            _assistant(out).setdefault("tool_calls", []).append(
                {"id": item.get("call_id"), "type": "function",
                 "function": {"name": item.get("name") or kind, "arguments": args}})
        elif kind == "reasoning":
            summary = "".join(s.get("text", "") for s in item.get("summary") or []
                              if isinstance(s, dict))
            if summary:
                message = _assistant(out)
                message["reasoning_content"] = message.get("reasoning_content", "") + summary


def _gemini_parts(parts: Any) -> list[dict[str, Any]]:
    return [p for p in parts or [] if isinstance(p, dict)] if isinstance(parts, list) else []


def _gemini_messages(request: dict[str, Any], reply: Any) -> list[dict[str, Any]]:
    """A Gemini call as chat messages: systemInstruction, contents, then the reply."""
    out: list[dict[str, Any]] = []
    system = request.get("systemInstruction") or request.get("system_instruction")
    text = system if isinstance(system, str) else "".join(
        p.get("text", "") for p in _gemini_parts((system or {}).get("parts")))
    if text:
        out.append({"role": "system", "content": text})
    candidates = reply.get("candidates") if isinstance(reply, dict) else None
    answer = candidates[0].get("content") if candidates and isinstance(candidates[0], dict) \
        else None
    contents = [c for c in request.get("contents") or [] if isinstance(c, dict)]
    for content in [*contents, {**(answer or {}), "role": "model"}]:
        parts = _gemini_parts(content.get("parts"))
        if content.get("role") == "model":
            message: dict[str, Any] = {"role": "assistant", "content": "".join(
                p.get("text", "") for p in parts if "text" in p and not p.get("thought"))}
            thoughts = "".join(p.get("text", "") for p in parts if p.get("thought"))
            if thoughts:
                message["reasoning_content"] = thoughts
            calls = [p.get("functionCall") or p.get("function_call") for p in parts]
            message_calls = [{"id": c.get("id") or c.get("name"), "type": "function",
                              "function": {"name": c.get("name"),
                                           "arguments": json.dumps(c.get("args") or {},
                                                                   ensure_ascii=False)}}
                             for c in calls if isinstance(c, dict)]
            if message_calls:
                message["tool_calls"] = message_calls
            out.append(message)
            continue
        for part in parts:
            result = part.get("functionResponse") or part.get("function_response")
            if isinstance(result, dict):
                response = result.get("response")
                out.append({"role": "tool", "tool_call_id": result.get("id") or result.get("name"),
                            "content": _text(response.get("output")) if isinstance(response, dict)
                            and isinstance(response.get("output"), str)
                            else json.dumps(response, ensure_ascii=False)})
        text = "".join(p.get("text", "") for p in parts if "text" in p)
        if text:
            out.append({"role": "user", "content": text})
    return out


def _gemini_tools(tools: Any) -> list[dict[str, Any]] | None:
    if not isinstance(tools, list):
        return None
    out = []
    for tool in tools:
        declarations = (tool.get("functionDeclarations") or tool.get("function_declarations")
                        if isinstance(tool, dict) else None)
        for decl in declarations or []:
            if isinstance(decl, dict):
                params = decl.get("parametersJsonSchema") or decl.get("parameters") or {}
                out.append({"type": "function", "function": {
                    "name": decl.get("name"), "description": decl.get("description", ""),
                    "parameters": params}})
    return out or None


def _responses_tools(tools: Any) -> list[dict[str, Any]] | None:
    if not isinstance(tools, list):
        return None
    out = []
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        if tool.get("type") == "function":
            out.append({"type": "function", "function": {
                "name": tool.get("name"), "description": tool.get("description", ""),
                "parameters": tool.get("parameters") or {}}})
        elif tool.get("name") or tool.get("type"):
            out.append({"type": "function", "function": {
                "name": tool.get("name") or tool.get("type"),
                "description": tool.get("description", ""), "parameters": {}}})
    return out or None


def skip_reason(call: dict[str, Any]) -> str | None:
    """Why a captured call yields no example (None: it yields one)."""
    request, response = call.get("request"), call.get("response")
    path = str(call.get("path", "")).split("?")[0]
    status = int(call.get("status") or 0)
    if not (200 <= status < 300):
        return f"failed (HTTP {status})"
    if "count_tokens" in path or ":countTokens" in path:
        return "token counting"
    if str(call.get("method", "POST")).upper() != "POST":
        return f"not a model reply ({call.get('method')} {path})"
    if api_of(path) == "unknown":
        return f"unknown API ({path})"
    if not isinstance(request, dict) or not isinstance(response, dict):
        return "no request or response recorded"
    if call.get("response_truncated"):
        return "response truncated"
    return None


def example_from_call(call: dict[str, Any]) -> dict[str, Any] | None:
    """One SFT example from one captured call, or None (`skip_reason` says why)."""
    if skip_reason(call) is not None:
        return None
    request, response = call["request"], call["response"]
    path = str(call.get("path", "")).split("?")[0]
    api = api_of(path)
    if isinstance(response.get("events"), list) and len(response) == 1:  # an older capture
        from benchflow.model_server.capture import reassemble

        response = reassemble(path, response["events"])
        if not isinstance(response, dict):
            return None
    if api == "openai-chat":
        choices = response.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            return None
        reply = {k: v for k, v in (choices[0].get("message") or {}).items()
                 if k in ("role", "content", "tool_calls", "reasoning_content")}
        reply.setdefault("role", "assistant")
        messages = [*request.get("messages", []), reply]
        tools = request.get("tools")
    elif api == "anthropic":
        if "content" not in response:
            return None
        messages = _anthropic_messages(request, {"content": response.get("content")})
        tools = _openai_tools_from_anthropic(request.get("tools"))
    elif api == "openai-responses":
        if "output" not in response:
            return None
        messages = _responses_messages(request, response)
        tools = _responses_tools(request.get("tools"))
    else:
        if not response.get("candidates"):
            return None
        messages = _gemini_messages(request, response)
        tools = _gemini_tools(request.get("tools"))
    example: dict[str, Any] = {"messages": messages}
    if tools:
        example["tools"] = tools
    example["role"] = call.get("role")
    example["call"] = {"call_seq": call.get("seq"), "path": path, "api": api,
                       "scene": call.get("scene"), "turn": call.get("turn"),
                       "round": call.get("round"),
                       "request_model": request.get("model") or _gemini_model(path),
                       **{k: call[k] for k in _TOKEN_KEYS if call.get(k) is not None}}
    for key in ("agent", "model"):
        if call.get(key) is not None:
            example[key] = call[key]
    return example


def _gemini_model(path: str) -> str | None:
    marker = "/models/"
    if marker not in path:
        return None
    return path.split(marker, 1)[1].split(":", 1)[0] or None


def model_call_examples(path: Path, skipped: Counter[str] | None = None
                        ) -> Iterator[dict[str, Any]]:
    """Examples from a `model_calls.jsonl` file, in call order (nothing if it is absent);
    `skipped` counts the calls that gave none, by reason."""
    if not path.is_file():
        return
    with path.open("rb") as fh:
        for line in fh:
            try:
                call = json.loads(line)
            except ValueError:
                continue  # a torn last line
            if not isinstance(call, dict):
                continue
            example = example_from_call(call)
            if example is not None:
                yield example
            elif skipped is not None:
                skipped[skip_reason(call) or "no model reply in the response"] += 1
