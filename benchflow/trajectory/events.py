"""The trajectory schema: one header line, then one event per line.

A rollout's `trajectory/acp_trajectory.jsonl` is what an agent did, in wire order:
every ACP `session/update` the agent sent, each prompt it received, each permission
asked and answered, commands run by non-ACP agents, and errors. Each line is one
model below; events are a union discriminated on `type`. The schema is versioned by
the header's `schema_version` (documented in `docs/reference/trajectory.md`).

ACP updates are converted by `event_from_update()`, which keeps the raw update (as
it arrived on the wire, camelCase keys) under `update` and copies the fields a
reader needs most (text, tool call id, status...) beside it.
"""

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

import orjson
from pydantic import Field, TypeAdapter, model_validator

from benchflow._models import StrictModel
from benchflow.roles import RoleIdentity

SCHEMA_VERSION: Literal[3] = 3
"""2 added trace ids (header `run_id`/`trace_id`/`span_id`, event `trace_id`/`span_id`);
3 added the header's `roles`, events' `session_turn`, `tool_result` events and a usage
event's `source`."""

EventType = Literal[
    "user_message",
    "agent_message",
    "agent_thought",
    "tool_call",
    "tool_call_update",
    "plan",
    "usage",
    "permission",
    "oracle",
    "command",
    "error",
    "agent_state",
    "tool_result",
    "workspace_changes",
]


def utc_now() -> datetime:
    """The current time, timezone-aware UTC (every `ts` and `started_at`)."""
    return datetime.now(UTC)


class TrajectoryHeader(StrictModel):
    """First line of a trajectory file: which rollout produced it."""

    schema_version: Literal[3] = SCHEMA_VERSION
    type: Literal["header"] = "header"
    job_name: str | None = None
    rollout_name: str | None = None
    task_name: str | None = None
    agents: list[str] = Field(default_factory=list)
    models: list[str] = Field(default_factory=list)
    started_at: datetime = Field(default_factory=utc_now)
    run_id: str | None = Field(default=None, description="the job's run id")
    trace_id: str | None = Field(default=None, description="the rollout's W3C trace id (32 hex)")
    span_id: str | None = Field(default=None, description="the rollout's root span id (16 hex)")
    roles: dict[str, RoleIdentity] = Field(
        default_factory=dict, description="each role's agent and model, by role name")

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("schema_version") == 1:
            data = migrate_v1(data)
        if isinstance(data, dict) and data.get("schema_version") == 2:
            data = migrate_v2(data)
        return data


def migrate_v1(header: dict[str, Any]) -> dict[str, Any]:
    """A v1 header as v2: v1 had no trace ids (they stay None); its events load unchanged."""
    return {**header, "schema_version": 2}


def migrate_v2(header: dict[str, Any]) -> dict[str, Any]:
    """A v2 header as v3: v2 had no `roles` (empty); its events load unchanged (no
    `session_turn`, no `tool_result` events)."""
    return {**header, "schema_version": 3}


class Usage(StrictModel):
    """Tokens and cost of one turn (or a sum of turns); None where the agent did not say."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    thought_tokens: int | None = None
    cached_read_tokens: int | None = None
    cached_write_tokens: int | None = None
    total_tokens: int | None = None
    cost: float | None = None
    currency: str | None = None

    def __add__(self, other: "Usage") -> "Usage":
        def add(a: float | None, b: float | None) -> Any:
            return b if a is None else a if b is None else a + b

        return Usage(
            input_tokens=add(self.input_tokens, other.input_tokens),
            output_tokens=add(self.output_tokens, other.output_tokens),
            thought_tokens=add(self.thought_tokens, other.thought_tokens),
            cached_read_tokens=add(self.cached_read_tokens, other.cached_read_tokens),
            cached_write_tokens=add(self.cached_write_tokens, other.cached_write_tokens),
            total_tokens=add(self.total_tokens, other.total_tokens),
            cost=add(self.cost, other.cost),
            currency=self.currency or other.currency,
        )


class _Event(StrictModel):
    """Fields every event carries: order, time and where in the rollout it happened."""

    seq: int
    ts: datetime
    scene: str | None = None
    role: str | None = None
    turn: int | None = None
    """The turn's index in its scene (scene-wide: coder 0, reviewer 1, coder 2)."""
    session_turn: int | None = None
    """The prompt's index within the role's ACP session (0-based)."""
    round: int | None = None
    session_id: str | None = None
    trace_id: str | None = None
    span_id: str | None = Field(default=None, description="the step's or tool call's span")
    skills: list[str] | None = None
    """Names of the skills the step had (absent when it had none)."""
    task_step: str | None = None
    """The step of a multi-step task the event belongs to (absent for one-step tasks)."""


class UserMessageEvent(_Event):
    """A prompt sent to the agent (`update` is None) or a user chunk the agent replayed."""

    type: Literal["user_message"] = "user_message"
    text: str = ""
    update: dict[str, Any] | None = None


class AgentMessageEvent(_Event):
    """An `agent_message_chunk`; `load()` merges consecutive chunks (`chunks` counts them)."""

    type: Literal["agent_message"] = "agent_message"
    text: str = ""
    chunks: int = 1
    update: dict[str, Any]


class AgentThoughtEvent(_Event):
    """An `agent_thought_chunk`; merged like agent messages by `load()`."""

    type: Literal["agent_thought"] = "agent_thought"
    text: str = ""
    chunks: int = 1
    update: dict[str, Any]


class ToolCallEvent(_Event):
    """The agent started a tool call (`sessionUpdate: tool_call`)."""

    type: Literal["tool_call"] = "tool_call"
    tool_call_id: str | None = None
    title: str | None = None
    kind: str | None = None
    status: str | None = None
    update: dict[str, Any]


class ToolCallUpdateEvent(_Event):
    """Progress or the end of a tool call (`sessionUpdate: tool_call_update`)."""

    type: Literal["tool_call_update"] = "tool_call_update"
    tool_call_id: str | None = None
    title: str | None = None
    status: str | None = None
    update: dict[str, Any]


class PlanEvent(_Event):
    """The agent's plan (full replacement, or a plan content/removal update)."""

    type: Literal["plan"] = "plan"
    entries: list[dict[str, Any]] | None = None
    update: dict[str, Any]


class UsageEvent(_Event):
    """Usage reported by the agent.

    `scope="session"`: an ACP `usage_update` (context window use; `usage.cost` is the
    session's cumulative cost so far). `scope="turn"`: what one prompt cost, written
    when the turn ends (tokens from the prompt response, cost as the growth of the
    cumulative cost); `update` is None. Sum `turn` events, never `session` ones.
    `source`: where a turn's tokens come from: `acp` (the agent reported them) or
    `model_calls` (counted by benchflow's model server or relay, for agents that report
    none over ACP).
    """

    type: Literal["usage"] = "usage"
    scope: Literal["turn", "session"] = "session"
    source: Literal["acp", "model_calls"] | None = None
    usage: Usage | None = None
    context_used: int | None = None
    context_size: int | None = None
    update: dict[str, Any] | None = None


class PermissionEvent(_Event):
    """A `session/request_permission` and the policy's answer."""

    type: Literal["permission"] = "permission"
    tool_call: dict[str, Any]
    options: list[dict[str, Any]]
    outcome: Literal["selected", "cancelled"]
    option_id: str | None = None
    option_kind: str | None = None
    policy: str


class OracleEvent(_Event):
    """The oracle agent ran the task's solution script."""

    type: Literal["oracle"] = "oracle"
    command: str
    exit_code: int | None = None
    output: str = ""
    duration_sec: float | None = None


class CommandEvent(_Event):
    """A command agent (or benchflow on its behalf) ran a command in the sandbox."""

    type: Literal["command"] = "command"
    command: str
    exit_code: int | None = None
    output: str = ""
    duration_sec: float | None = None


class ErrorEvent(_Event):
    """Something ended the agent's work abnormally (timeout, crash, protocol error)."""

    type: Literal["error"] = "error"
    error_type: str
    message: str
    exit_code: int | None = None
    stderr_tail: str | None = None
    cancel_sent: bool = False
    stop_reason: str | None = None


class AgentStateEvent(_Event):
    """An update about the session rather than the conversation: available commands,
    mode, config options, session info, or the model benchflow selected (`name`)."""

    type: Literal["agent_state"] = "agent_state"
    name: str
    update: dict[str, Any]


class ToolResultEvent(_Event):
    """A tool call's arguments and result as the agent sent them to the model, seen by
    benchflow's model server or relay: written after a turn for the tool calls whose ACP
    updates carried no arguments or no output (gemini reports neither). `tool_call_id` is
    the id in the agent's ACP updates; `call_id` the one on the wire."""

    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    call_id: str | None = None
    name: str | None = None
    arguments: dict[str, Any] | None = None
    output: str | None = None
    source: Literal["model_calls"] = "model_calls"
class FileChange(StrictModel):
    """One file a turn created, modified or deleted (workspace-relative `path`). `size` and
    `sha256` are the new content's (None when deleted); `diff` a unified diff for a text
    file up to a bounded size; `flagged`: a test, verifier or config file of the task."""

    path: str
    change: Literal["created", "modified", "deleted"]
    size: int | None = None
    sha256: str | None = None
    diff: str | None = None
    flagged: bool = False


class WorkspaceChangesEvent(_Event):
    """What one turn did to the workspace, attributed to the role and turn that did it
    (written by benchflow after the turn; `changes` is empty when nothing changed)."""

    type: Literal["workspace_changes"] = "workspace_changes"
    changes: list[FileChange] = Field(default_factory=list)


Event = Annotated[
    UserMessageEvent
    | AgentMessageEvent
    | AgentThoughtEvent
    | ToolCallEvent
    | ToolCallUpdateEvent
    | PlanEvent
    | UsageEvent
    | PermissionEvent
    | OracleEvent
    | CommandEvent
    | ErrorEvent
    | AgentStateEvent
    | ToolResultEvent
    | WorkspaceChangesEvent,
    Field(discriminator="type"),
]
"""One trajectory line after the header."""

EVENT_CLASSES: dict[str, type[_Event]] = {
    cls.model_fields["type"].default: cls for cls in get_args(get_args(Event)[0])}
"""Each event type's model, by its `type`."""


@functools.cache
def event_adapter() -> TypeAdapter[Event]:
    """The validator of any event line. Built on first use: the schemas of every event
    type take ~10 ms, which a process that writes one kind of event never pays."""
    return TypeAdapter(Event)


def _text_of(content: Any) -> str:
    """The text of an ACP content block; other kinds (image, resource) yield ''."""
    if not isinstance(content, dict):
        return ""
    if content.get("type") == "text":
        return str(content.get("text", ""))
    resource = content.get("resource")
    if content.get("type") == "resource" and isinstance(resource, dict):
        return str(resource.get("text", ""))
    return ""


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def usage_from_acp(data: dict[str, Any] | None) -> Usage | None:
    """A `Usage` from an ACP `Usage` object (camelCase, e.g. `PromptResponse.usage`)."""
    if not isinstance(data, dict):
        return None

    def num(key: str) -> int | None:
        value = data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return Usage(
        input_tokens=num("inputTokens"),
        output_tokens=num("outputTokens"),
        thought_tokens=num("thoughtTokens"),
        cached_read_tokens=num("cachedReadTokens"),
        cached_write_tokens=num("cachedWriteTokens"),
        total_tokens=num("totalTokens"),
    )


def _message_fields(update: dict[str, Any]) -> dict[str, Any]:
    content = update.get("content")
    if type(content) is dict and content.get("type") == "text":  # a chunk: by the hundred
        text = content.get("text", "")
        return {"text": text if type(text) is str else str(text)}
    return {"text": _text_of(content)}


def _tool_call_fields(update: dict[str, Any]) -> dict[str, Any]:
    return {"tool_call_id": _opt_str(update.get("toolCallId")),
            "title": _opt_str(update.get("title")), "kind": _opt_str(update.get("kind")),
            "status": _opt_str(update.get("status"))}


def _tool_call_update_fields(update: dict[str, Any]) -> dict[str, Any]:
    return {"tool_call_id": _opt_str(update.get("toolCallId")),
            "title": _opt_str(update.get("title")), "status": _opt_str(update.get("status"))}


_STREAMED: dict[str, tuple[type[_Event], Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "agent_message_chunk": (AgentMessageEvent, _message_fields),
    "agent_thought_chunk": (AgentThoughtEvent, _message_fields),
    "user_message_chunk": (UserMessageEvent, _message_fields),
    "tool_call": (ToolCallEvent, _tool_call_fields),
    "tool_call_update": (ToolCallUpdateEvent, _tool_call_update_fields),
}
"""The updates an agent streams by the hundred: their event class and fields."""

_COMMON_FIELDS = tuple(_Event.model_fields)
_COMMON_KEYS = frozenset(_COMMON_FIELDS)
_OWN_FIELDS = {cls: tuple((name, field.default) for name, field in cls.model_fields.items()
                          if name not in _Event.model_fields)
               for cls, _ in _STREAMED.values()}


CHUNK_TYPES = {"agent_message_chunk": "agent_message", "agent_thought_chunk": "agent_thought"}
"""Message and thought chunks (`sessionUpdate` -> event type): their own fields are type,
text, chunks (1) and update (`chunk_line` writes them in that order; checked here at
import)."""


def _check_chunk_fields() -> None:
    for kind, type_ in CHUNK_TYPES.items():
        cls = _STREAMED[kind][0]
        names = tuple(name for name, _ in _OWN_FIELDS[cls])
        defaults = dict(_OWN_FIELDS[cls])
        if (names != ("type", "text", "chunks", "update") or defaults["type"] != type_
                or defaults["chunks"] != 1):
            raise AssertionError(f"{cls.__name__}'s fields changed: update streamed_update_line")


_check_chunk_fields()


def event_from_update(update: dict[str, Any], **common: Any) -> Event:
    """Convert one raw ACP session update (the `update` of a `session/update`) to an event.

    `common` holds `seq`, `ts` and the context fields (scene, role, turn, round,
    session_id). Unknown or malformed updates never raise: they become
    `agent_state` events so nothing the agent sent is lost.
    """
    kind = update.get("sessionUpdate")
    streamed = _STREAMED.get(kind) if isinstance(kind, str) else None
    if streamed is not None:
        cls, fields = streamed
        return cls(**fields(update), update=update, **common)  # type: ignore[return-value]
    if kind in ("plan", "plan_update", "plan_removed"):
        entries = update.get("entries")
        valid = isinstance(entries, list) and all(isinstance(e, dict) for e in entries)
        return PlanEvent(entries=entries if valid else None, update=update, **common)
    if kind == "usage_update":
        cost, meta = _as_dict(update.get("cost")), _as_dict(update.get("_meta"))
        usage = usage_from_acp(meta.get("usage")) or Usage()
        amount = cost.get("amount")
        if isinstance(amount, int | float) and not isinstance(amount, bool):
            usage = usage.model_copy(
                update={"cost": float(amount), "currency": _opt_str(cost.get("currency"))}
            )
        used, size = update.get("used"), update.get("size")
        return UsageEvent(
            usage=usage,
            context_used=used if isinstance(used, int) and not isinstance(used, bool) else None,
            context_size=size if isinstance(size, int) and not isinstance(size, bool) else None,
            update=update,
            **common,
        )
    return AgentStateEvent(name=str(kind), update=update, **common)


def update_line(update: dict[str, Any], **common: Any) -> bytes:
    """The trajectory line of `event_from_update(update, **common)`: its JSON without
    None fields, as `model_dump_json(exclude_none=True)` writes it.

    Message, thought and tool call updates (the ones an agent streams by the hundred)
    are written straight from the dicts, with no model built, validated and dumped per
    update; other kinds, and values orjson cannot write (an integer over 64 bits), go
    through the model.
    """
    kind = update.get("sessionUpdate")
    streamed = _STREAMED.get(kind) if isinstance(kind, str) else None
    if streamed is not None:
        if not common.keys() <= _COMMON_KEYS:
            raise TypeError(f"unknown event fields: {sorted(common.keys() - _COMMON_KEYS)}")
        line = _streamed_line(streamed, update, {
            name: value for name in _COMMON_FIELDS if (value := common.get(name)) is not None})
        if line is not None:
            return line
    return event_from_update(update, **common).model_dump_json(exclude_none=True).encode()


def streamed_update_line(update: dict[str, Any], seq: int, ts: datetime,
                         head: dict[str, Any]) -> bytes | None:
    """`update_line(update, seq=seq, ts=ts, **head)` for the kinds an agent streams by the
    hundred, None for any other kind (or a value orjson cannot write): call `update_line`.

    `head` holds the other common fields, without None values and in the order of
    `_Event`'s fields (`stream_head`): built once for a run of updates of one turn.
    """
    kind = update.get("sessionUpdate")
    if type(kind) is not str:
        return None
    chunk_type = CHUNK_TYPES.get(kind)
    if chunk_type is not None:  # most of what an agent streams: no field list walked
        try:
            return chunk_line(seq, ts, head, chunk_type, _message_fields(update)["text"],
                              update)
        except (TypeError, orjson.JSONEncodeError):
            return None
    streamed = _STREAMED.get(kind)
    if streamed is None:
        return None
    return _streamed_line(streamed, update, {"seq": seq, "ts": ts, **head})


def chunk_line(seq: int, ts: datetime, head: dict[str, Any], chunk_type: str, text: str,
               update: dict[str, Any]) -> bytes:
    """`streamed_update_line` of a message or thought chunk (`CHUNK_TYPES[kind]` is its
    `chunk_type`) whose text is already known: `text` must be what `event_from_update`
    takes from it (a text block's `text`, a string).

    Raises:
        TypeError: a value orjson cannot write (`orjson.JSONEncodeError` is one): use
            `update_line`.
    """
    return orjson.dumps({"seq": seq, "ts": ts, **head, "type": chunk_type, "text": text,
                         "chunks": 1, "update": update}, option=orjson.OPT_UTC_Z)


def stream_head(**common: Any) -> dict[str, Any] | None:
    """The `head` of `streamed_update_line` for these common fields (scene, role, turn...),
    or None when one is no event field (`update_line` says which)."""
    if not common.keys() <= _COMMON_KEYS or "seq" in common or "ts" in common:
        return None
    return {name: value for name in _COMMON_FIELDS if (value := common.get(name)) is not None}


def _streamed_line(streamed: tuple[type[_Event], Callable[[dict[str, Any]], dict[str, Any]]],
                   update: dict[str, Any], line: dict[str, Any]) -> bytes | None:
    cls, fields_of = streamed
    fields = fields_of(update)
    for name, default in _OWN_FIELDS[cls]:
        value = update if name == "update" else fields.get(name, default)
        if value is not None:
            line[name] = value
    try:
        return orjson.dumps(line, option=orjson.OPT_UTC_Z)
    except (TypeError, orjson.JSONEncodeError):
        return None


__all__ = [
    "EVENT_CLASSES",
    "SCHEMA_VERSION",
    "AgentMessageEvent",
    "AgentStateEvent",
    "AgentThoughtEvent",
    "CommandEvent",
    "ErrorEvent",
    "Event",
    "EventType",
    "OracleEvent",
    "PermissionEvent",
    "PlanEvent",
    "RoleIdentity",
    "ToolCallEvent",
    "ToolCallUpdateEvent",
    "ToolResultEvent",
    "TrajectoryHeader",
    "Usage",
    "UsageEvent",
    "UserMessageEvent",
    "FileChange",
    "WorkspaceChangesEvent",
    "event_adapter",
    "event_from_update",
    "update_line",
    "chunk_line",
    "CHUNK_TYPES",
    "stream_head",
    "streamed_update_line",
    "migrate_v1",
    "migrate_v2",
    "usage_from_acp",
    "utc_now",
]
