"""The neutral view of a model request and of the scripted reply, shared by every wire format.

Each wire-format module turns a provider's request body into a `Conversation` (what the
script needs to know: offered tools, how far the conversation got, whether JSON is asked
for) and renders a `Reply` back in that provider's shape, plain or as server-sent events.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

EventKind = Literal["user", "tool_result", "assistant_text", "assistant_tool_call"]


class RequestError(Exception):
    """A request the server cannot answer; rendered as a 4xx in the caller's error format."""

    def __init__(self, message: str, *, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param


@dataclass(frozen=True)
class ToolSpec:
    """A tool the request offers: its name, JSON schema of arguments and wire kind.

    `kind` is "function" for ordinary function tools, "local_shell" for the Responses
    API's built-in shell, "custom" for free-form tools and "builtin" for provider-defined
    tools without a schema (e.g. Anthropic's `bash_20250124`).

    A member of a Responses API `namespace` tool (codex offers each MCP server's tools as
    one: `mcp__benchflow` holding `web_search`) has the `namespace`, and `name` is
    `<namespace>__<member>` (`mcp__benchflow__web_search`), the name scripts and logs use.
    """

    name: str
    schema: dict[str, Any] | None = None
    kind: str = "function"
    type: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class Progress:
    """How far a conversation got: tool results it holds and assistant turns ended in text."""

    tool_results: int = 0
    finished_turns: int = 0

    @property
    def position(self) -> int:
        return self.tool_results + self.finished_turns


def progress_of(events: Iterable[EventKind]) -> Progress:
    """Count tool results and finished assistant turns in a flattened conversation.

    A finished turn is a run of consecutive assistant items that holds text and no tool
    call and is followed by something else (a trailing assistant run is a prefill, not a
    finished turn). Runs are grouped because some agents send one reply as several items.
    """
    tool_results = finished = 0
    run: list[EventKind] = []

    def close_run() -> None:
        nonlocal finished
        if "assistant_text" in run and "assistant_tool_call" not in run:
            finished += 1
        run.clear()

    for kind in events:
        if kind.startswith("assistant"):
            run.append(kind)
            continue
        close_run()
        if kind == "tool_result":
            tool_results += 1
    return Progress(tool_results, finished)


@dataclass
class Conversation:
    """What one request asks, independent of its wire format."""

    api: str
    model: str
    stream: bool = False
    tools: list[ToolSpec] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)
    system: str = ""
    last_user_text: str = ""
    first_user_text: str = ""
    response_schema: dict[str, Any] | None = None
    json_mode: bool = False
    input_chars: int = 0
    options: dict[str, Any] = field(default_factory=dict)
    role: str | None = None
    """The rollout role whose key the request carried (None: unknown)."""
    user_texts: list[str] = field(default_factory=list)
    """Every user message's text, in order."""
    events: list[EventKind] = field(default_factory=list)
    """The flattened conversation (one `user` per entry of `user_texts`)."""

    def progress_after(self, user_index: int) -> Progress:
        """How far the conversation got after its `user_index`-th user message."""
        seen = -1
        for i, kind in enumerate(self.events):
            if kind == "user":
                seen += 1
                if seen == user_index:
                    return progress_of(self.events[i + 1:])
        return self.progress

    @property
    def input_tokens(self) -> int:
        return max(1, self.input_chars // 4)

    @property
    def prompt_text(self) -> str:
        return f"{self.system}\n{self.last_user_text}"


@dataclass(frozen=True)
class ToolCall:
    """One tool call the scripted model makes."""

    call_id: str
    name: str
    arguments: dict[str, Any]
    kind: str = "function"
    namespace: str | None = None
    """The tool's Responses API namespace (see `ToolSpec`); `name` is then qualified."""

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)

    @property
    def member(self) -> str:
        """The name within the namespace (`web_search`), else the name."""
        return member_name(self.namespace, self.name)


def qualified_name(namespace: str | None, member: str) -> str:
    """A namespace member's name as scripts see it: `mcp__benchflow` + `web_search` ->
    `mcp__benchflow__web_search` (a namespace ending in `__` is not doubled)."""
    if not namespace:
        return member
    return f"{namespace}{member}" if namespace.endswith("__") else f"{namespace}__{member}"


def member_name(namespace: str | None, name: str) -> str:
    """The inverse of `qualified_name`."""
    if not namespace:
        return name
    return name.removeprefix(qualified_name(namespace, ""))


@dataclass(frozen=True)
class Reply:
    """The scripted model's answer: optional text, then at most one tool call.

    `source` says why it was chosen ("step" or "side") and `step_index` which script
    step it came from (None past the end or for side answers); both go to the request log.
    """

    text: str = ""
    tool_call: ToolCall | None = None
    source: str = "step"
    step_index: int | None = None

    @property
    def output_tokens(self) -> int:
        size = len(self.text) + (
            len(self.tool_call.arguments_json) + len(self.tool_call.name) if self.tool_call else 0
        )
        return max(1, size // 4)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"source": self.source, "step": self.step_index}
        if self.text:
            out["text"] = self.text
        if self.tool_call:
            out["tool"] = self.tool_call.name
            out["arguments"] = self.tool_call.arguments
        return out


def stable_id(*parts: object, length: int = 24) -> str:
    """A deterministic id from the parts, so repeated runs of a script log identical ids."""
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:length]


def text_chunks(text: str, size: int = 24) -> list[str]:
    """Split text into a few pieces for streaming (at least one, possibly empty)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; `data` is JSON-encoded unless it is already a string."""
    payload = (
        data
        if isinstance(data, str)
        else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    )
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def require(body: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    """Return `body[key]` or raise a `RequestError` naming the missing or mistyped field."""
    if key not in body:
        raise RequestError(f"`{key}` is required: {what}", param=key)
    value = body[key]
    if not isinstance(value, kind):
        names = " or ".join(t.__name__ for t in (kind if isinstance(kind, tuple) else (kind,)))
        raise RequestError(f"`{key}` must be {names}, got {type(value).__name__}", param=key)
    return value


def tool_list(tools: Any) -> list[Any]:
    """A request's `tools` as a list (None: no tools). Raises RequestError for anything else."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise RequestError("`tools` must be a list", param="tools")
    return tools


def text_of(
    content: Any, text_types: tuple[str, ...] = ("text", "input_text", "output_text")
) -> str:
    """Concatenated text of a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            p["text"]
            for p in content
            if isinstance(p, dict)
            and p.get("type", "text") in text_types
            and isinstance(p.get("text"), str)
        )
    return ""
