"""Choose the scripted reply for a conversation: the next script step or a side answer.

The main loop of an agent offers tools; its position in the script is the number of tool
results in the conversation plus the assistant turns that already ended in text. Side
requests (titles, topic detection, gemini's complexity router and next-speaker check) offer
no tools or ask for JSON, and get a fixed valid answer that never advances the script.
"""

from __future__ import annotations

import json
import re
from typing import Any

from benchflow.model_server.conversation import (
    Conversation,
    Reply,
    RequestError,
    ToolCall,
    stable_id,
)
from benchflow.model_server.script import Script, ShellStep, TextStep, ToolStep
from benchflow.model_server.tools import (
    filler_value,
    find_shell_tool,
    find_tool,
    is_tool_pattern,
    normalize_schema,
    shell_arguments,
    tools_matching,
)

_PREFERRED_ENUM = ("user", "flash")
"""Enum members chosen when offered: gemini's next-speaker check ends the turn with "user"."""

_KNOWN_JSON_FIELDS = {"title", "isNewTopic", "branch"}


def plan_reply(script: Script, conv: Conversation) -> Reply:
    """The reply to `conv` under `script`.

    Raises:
        RequestError: the step needs a tool the request does not offer.
    """
    chosen = script.select(conv.user_texts or [conv.first_user_text], conv.role) \
        if script.answers else None
    answer = chosen[0] if chosen is not None else None
    steps = answer.all_steps if answer is not None else None
    position = (conv.progress_after(chosen[1]) if chosen is not None and answer.has_pattern
                else conv.progress).position
    index, step = script.step_at(position, steps)
    # A side request (no tools, or JSON asked for) gets a side answer, unless a matched
    # answer's next step is text (a QA answer, served to tool-less model agents too).
    side = conv.response_schema is not None or conv.json_mode or not conv.tools
    if side and not (answer is not None and answer.has_pattern and isinstance(step, TextStep)):
        if conv.response_schema is not None or conv.json_mode:
            return Reply(text=json.dumps(side_json(script, conv)), source="side")
        return Reply(text=side_text(script, conv), source="side")
    if isinstance(step, TextStep):
        return Reply(text=step.text, step_index=index,
                     source="answer" if answer is not None else "step")
    call = _tool_call(step, index, conv)
    return Reply(text=step.say or "", tool_call=call, step_index=index,
                 source="answer" if answer is not None else "step")


def _tool_call(step: ShellStep | ToolStep, index: int | None, conv: Conversation) -> ToolCall:
    offered = ", ".join(t.name for t in conv.tools) or "none"
    where = f"script step {index}" if index is not None else "the script's last step"
    if isinstance(step, ToolStep):
        tool = find_tool(conv.tools, step.tool)
        if tool is None:
            raise RequestError(f"{where} calls tool `{step.tool}` but {_not_offered(step.tool, conv)}")
        args = dict(step.args)
        name = tool.name
    else:
        tool = find_tool(conv.tools, step.tool) if step.tool else find_shell_tool(conv.tools)
        if tool is None:
            missing = _not_offered(step.tool, conv) if step.tool else \
                f"the request offers no shell tool (offered: {offered})"
            raise RequestError(f"{where} runs the shell command {step.shell!r} but {missing}")
        args = {**shell_arguments(tool, step.shell), **step.args}
        name = tool.name
    call_id = stable_id(conv.api, index, name, json.dumps(args, sort_keys=True))
    return ToolCall(call_id=call_id, name=name, arguments=args, kind=tool.kind,
                    namespace=tool.namespace)


def _not_offered(name: str, conv: Conversation) -> str:
    """Why the request has no tool `name` (an exact name or a glob pattern)."""
    offered = ", ".join(t.name for t in conv.tools) or "none"
    several = tools_matching(conv.tools, name) if is_tool_pattern(name) else []
    if len(several) > 1:
        return (f"the pattern matches several offered tools ({', '.join(t.name for t in several)}): "
                "make it narrower")
    return f"the request does not offer it (offered: {offered})"


def side_text(script: Script, conv: Conversation) -> str:
    """A free-text side answer: the first matching rule, JSON when the prompt asks for it, else the title."""
    prompt = conv.prompt_text
    lowered = prompt.lower()
    for rule in script.side_answers.rules:
        if rule.contains.lower() in lowered:
            return rule.text
    if "json" in lowered:
        return json.dumps(_json_from_prompt(script, prompt))
    return script.side_answers.title


def _json_from_prompt(script: Script, prompt: str) -> dict[str, Any]:
    """A JSON answer for prompts that describe their fields in words (Claude Code's title prompts)."""
    quoted = set(re.findall(r"[\"'`](\w+)[\"'`]", prompt))
    fields = (quoted & _KNOWN_JSON_FIELDS) or {"title"}
    title = script.side_answers.title
    values = {
        "title": title,
        "isNewTopic": False,
        "branch": "scripted/" + re.sub(r"\W+", "-", title.lower()).strip("-"),
    }
    return {**{k: values[k] for k in sorted(fields)}, **script.side_answers.json_fields}


def side_json(script: Script, conv: Conversation) -> Any:
    """A JSON side answer: a valid instance of the requested schema, with configured overrides."""
    if conv.response_schema is None:
        return _json_from_prompt(script, conv.prompt_text)
    value = schema_instance(conv.response_schema, script.side_answers.title)
    if isinstance(value, dict):
        value.update(script.side_answers.json_fields)
    return value


def schema_instance(
    schema: Any, title: str = "Scripted session", *, _root: Any = None, _depth: int = 0
) -> Any:
    """A value that validates against a JSON schema (or a Gemini `Schema`).

    Objects get every property; strings their first enum member (preferring "user" and
    "flash"), or a short sentence; numbers their minimum, and at least 1 when named like a
    score (gemini's router needs a complexity score >= 1); booleans false; arrays `minItems`
    items.
    """
    root = schema if _root is None else _root
    schema = normalize_schema(_resolve_ref(schema, root))
    if _depth > 12:
        return None
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if enum:
        return next((v for v in _PREFERRED_ENUM if v in enum), enum[0])
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties") or {}
        return {
            name: _property_value(name, prop, title, root, _depth)
            for name, prop in props.items()
            if isinstance(prop, dict)
        }
    if kind == "array":
        count = int(schema.get("minItems") or schema.get("min_items") or 0)
        item = schema.get("items") or {}
        return [schema_instance(item, title, _root=root, _depth=_depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        return _number(schema, "")
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return title


def _property_value(name: str, prop: dict[str, Any], title: str, root: Any, depth: int) -> Any:
    prop = normalize_schema(_resolve_ref(prop, root))
    if prop.get("type") in ("integer", "number") and "enum" not in prop:
        return _number(prop, name)
    if prop.get("type") == "string" and not prop.get("enum") and "const" not in prop:
        if "reason" in name.lower() or "explanation" in name.lower():
            return "Scripted answer."
        if "title" not in name.lower() and prop.get("default") is not None:
            return prop["default"]
        return title if "title" in name.lower() else filler_value(name, prop) or "Scripted answer."
    return schema_instance(prop, title, _root=root, _depth=depth + 1)


def _number(schema: dict[str, Any], name: str) -> int | float:
    low = schema.get("minimum")
    if (
        low is None
        and "exclusiveMinimum" in schema
        and not isinstance(schema["exclusiveMinimum"], bool)
    ):
        low = schema["exclusiveMinimum"] + 1
    value = low if low is not None else 0
    if "score" in name.lower():
        value = max(value, 1)
    high = schema.get("maximum")
    if high is not None:
        value = min(value, high)
    value = float(value) if schema.get("type") == "number" else int(value)
    return int(value) if float(value).is_integer() else value


def _resolve_ref(schema: Any, root: Any) -> Any:
    if not isinstance(schema, dict) or "$ref" not in schema or not isinstance(root, dict):
        return schema
    ref = schema["$ref"]
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return {}
    node: Any = root
    for part in ref[2:].split("/"):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}
