"""The agent-side tracing client: traces, spans, model calls, tools, messages, outcomes.

```python
from benchflow.tracing import Rollout, usage_from_openai

client = Rollout(agent_name="benchmark_agent", environment="benchmark")
with client.trace("benchmark_agent", trace_id=attempt["traceId"]) as trace:
    trace.message(role="user", content=instruction)
    with trace.span("task", name="solve") as task:
        task.record_input(task_payload)
        with trace.llm("openai.responses", model="gpt-4.1-mini", provider="openai") as llm:
            ...
            llm.set_usage(**usage_from_openai(response))
    trace.signal("benchmark.score", 1.0)
```

Each call builds one event of the taxonomy (`_taxonomy.py`), passes it through the
client's `scrubber` and `before_send` hooks, then bounds it (`Limits`); only what
survives is kept. A span is handed to the exporter (OpenTelemetry, `_otel.py`) when it
ends, with its start and end events as attributes and its point events as span events.
Nested `with` blocks nest: a span, message or signal created through a trace goes to the
innermost span still open in the current context (thread or asyncio task).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any

from benchflow.tracing._collector import (
    CheckResult,
    check_endpoint,
    collector_headers,
    traces_url,
)
from benchflow.tracing._taxonomy import (
    CAPTURE_TYPES,
    Limits,
    bound_event,
    iso,
    now_ns,
    scrub_data,
    to_jsonable,
)

if TYPE_CHECKING:
    from benchflow.tracing._otel import OtelExport

log = logging.getLogger(__name__)

Event = dict[str, Any]
Scrubber = Callable[[str], str]
BeforeSend = Callable[[Event], "Event | None"]

_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")
_current: ContextVar[_Node | None] = ContextVar("benchflow_tracing_span", default=None)


def _new_span_id() -> str:
    while True:
        value = secrets.token_hex(8)
        if value.strip("0"):
            return value


def normalize_trace_id(value: str | None) -> str:
    """A W3C trace id (32 lowercase hex) for `value`.

    32 hex digits (a benchflow attempt's `traceId`) are kept, a UUID loses its dashes,
    anything else (`"trace_123"`) is hashed, so the same value always gives the same id.
    None gives a new random id.
    """
    if value is None:
        while True:
            new = secrets.token_hex(16)
            if new.strip("0"):
                return new
    compact = value.replace("-", "") if len(value) == 36 else value
    if _HEX32.match(compact) and compact.strip("0"):
        return compact.lower()
    return hashlib.sha256(value.encode()).hexdigest()[:32]


_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$")


def _parse_traceparent(value: str | None) -> tuple[str, str] | None:
    match = _TRACEPARENT.match((value or "").strip().lower())
    return (match[1], match[2]) if match else None


def _clean(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


class _Node:
    """An open span of a trace (the trace itself, a step, a model call or a tool call)."""

    _start_type = "span.start"
    _end_type = "span.end"
    kind = "span"

    def __init__(self, client: Rollout, root: Trace | None, parent: _Node | None, name: str,
                 data: dict[str, Any]) -> None:
        self._client = client
        self._root: Trace = root if root is not None else self  # type: ignore[assignment]
        self._parent = parent
        self._lock = threading.Lock()
        self.name = name
        self.span_id = _new_span_id()
        exported = parent
        while exported is not None and exported.dropped:
            exported = exported._parent
        self.parent_span_id: str | None = exported.span_id if exported is not None else None
        if root is None:
            self.trace_id = data.pop("_trace_id")
            self.parent_span_id = data.pop("_parent_span_id", None)
        else:
            self.trace_id = root.trace_id
        self._events: list[Event] = []
        self._dropped_events = 0
        self._output: Any = None
        self._usage: dict[str, Any] = {}
        self._status = "ok"
        self._error: str | None = None
        self._token: Token[_Node | None] | None = None
        self.ended = False
        self.start_ns = now_ns()
        self.end_ns: int | None = None
        if root is not None:
            root._open.add(self)
        self.start_event = client._prepare(self, self._start_type, data, self.start_ns)
        self.dropped = self.start_event is None
        self.end_event: Event | None = None

    # -- context management ---------------------------------------------------------------

    def __enter__(self) -> Any:
        self._token = _current.set(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._token is not None:
            try:
                _current.reset(self._token)
            except ValueError:  # exited in another context: leave that context alone
                pass
            self._token = None
        if exc is not None and not self.ended:
            self.record_error(exc)
        self.end()

    async def __aenter__(self) -> Any:
        return self.__enter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self.__exit__(exc_type, exc, tb)

    def _is_ancestor_of(self, node: _Node) -> bool:
        cursor: _Node | None = node
        while cursor is not None:
            if cursor is self:
                return True
            cursor = cursor._parent
        return False

    def _owner(self) -> _Node:
        """The innermost span open in this context below `self` (or `self`)."""
        current = _current.get()
        if current is not None and not current.ended and self._is_ancestor_of(current):
            return current
        return self

    # -- point events ---------------------------------------------------------------------

    def _emit(self, type: str, data: dict[str, Any]) -> Event | None:
        if self.ended:
            log.warning("tracing: %s after %r ended: dropped", type, self.name)
            return None
        with self._lock:
            if len(self._events) >= self._client.limits.max_events_per_span:
                self._dropped_events += 1
                return None
        event = self._client._prepare(self, type, data, now_ns())
        if event is not None:
            with self._lock:
                self._events.append(event)
        return event

    def message(self, role: str, content: Any, *, internal: bool = False,
                name: str | None = None, **fields: Any) -> None:
        """A visible message (user, assistant, system, tool); `internal=True` marks hidden
        routing messages."""
        self._owner()._emit("message", _clean(role=role, content=content, internal=internal,
                                              name=name, **fields))

    def feedback(self, name: str, value: Any, *, comment: str | None = None,
                 **fields: Any) -> None:
        """Explicit user feedback: thumbs up, a rating, a correction, CSAT."""
        self._owner()._emit("feedback", _clean(name=name, value=value, comment=comment,
                                               **fields))

    def signal(self, name: str, value: Any = True, **fields: Any) -> None:
        """An outcome: resolved, escalated, purchased, a benchmark score, passed."""
        self._owner()._emit("user.signal", _clean(name=name, value=value, **fields))

    def update(self, **fields: Any) -> None:
        """Attributes learned while the span runs (a `span.update` event)."""
        self._emit("span.update", fields)

    def record_input(self, value: Any) -> None:
        """What this span works on (sanitize it: the scrubber still runs)."""
        self._emit("span.update", {"input": value})

    def record_output(self, value: Any) -> None:
        """What this span produced; sent in its end event."""
        self._output = value

    def set_usage(self, input_tokens: int | None = None, output_tokens: int | None = None,
                  total_tokens: int | None = None, cost: float | None = None,
                  **counts: Any) -> None:
        """Token usage (and cost) of this span, sent in its end event."""
        if total_tokens is None and input_tokens is not None and output_tokens is not None:
            total_tokens = input_tokens + output_tokens
        self._usage.update(_clean(input_tokens=input_tokens, output_tokens=output_tokens,
                                  total_tokens=total_tokens, cost=cost, **counts))

    def record_error(self, error: BaseException | str) -> None:
        """Mark the span failed and emit an `error` event."""
        if isinstance(error, BaseException):
            kind, message = type(error).__name__, str(error)
        else:
            kind, message = "error", error
        self._status, self._error = "error", f"{kind}: {message}"
        self._emit("error", {"error_type": kind, "message": message})

    # -- child spans ----------------------------------------------------------------------

    def span(self, type: str = "span", name: str | None = None, *,
             attributes: Mapping[str, Any] | None = None, input: Any = None,
             **fields: Any) -> Span:
        """A step (`type`: planner, router, retrieval, task, evaluator...), named by purpose."""
        parent = self._owner()
        node = Span(self._client, self._root, parent, name or type, _clean(
            span_type=type, attributes=dict(attributes) if attributes else None, **fields))
        if input is not None:
            node.record_input(input)
        return node

    def llm(self, name: str = "llm", *, model: str | None = None, provider: str | None = None,
            stream: bool = False, record_chunks: bool = True,
            attributes: Mapping[str, Any] | None = None, input: Any = None,
            **fields: Any) -> LLMSpan:
        """A model call. `stream=True` emits `llm.stream_start`, a chunk event per
        `record_chunk` (unless `record_chunks=False`) and `llm.stream_end`."""
        parent = self._owner()
        node = LLMSpan(self._client, self._root, parent, name, _clean(
            span_type="llm", model=model, provider=provider, stream=stream,
            attributes=dict(attributes) if attributes else None, **fields),
            stream=stream, record_chunks=record_chunks)
        if input is not None:
            node.record_input(input)
        return node

    def tool(self, name: str, *, tool_call_id: str | None = None, arguments: Any = None,
             attributes: Mapping[str, Any] | None = None, **fields: Any) -> ToolCall:
        """A tool, function, browser action, DB query or API call the agent makes."""
        parent = self._owner()
        return ToolCall(self._client, self._root, parent, name, _clean(
            tool_name=name, tool_call_id=tool_call_id, arguments=arguments,
            attributes=dict(attributes) if attributes else None, **fields))

    # -- end ------------------------------------------------------------------------------

    def _end_data(self) -> dict[str, Any]:
        assert self.end_ns is not None
        return _clean(output=self._output, usage=self._usage or None, status=self._status,
                      error=self._error, duration_ms=(self.end_ns - self.start_ns) / 1e6,
                      dropped_events=self._dropped_events or None)

    def end(self, output: Any = None) -> None:
        """End the span (a `with` block does it); `output` is `record_output(output)`."""
        if self.ended:
            return
        if output is not None:
            self._output = output
        self.end_ns = now_ns()
        self.end_event = self._client._prepare(self, self._end_type, self._end_data(),
                                               self.end_ns)
        self.ended = True
        self._root._open.discard(self)
        self._client._export(self)

    @property
    def events(self) -> list[Event]:
        """The point events kept so far (after the hooks)."""
        with self._lock:
            return list(self._events)


class Span(_Node):
    """A step of the agent: planner, router, retrieval, parser, evaluator, a custom task."""


class LLMSpan(_Node):
    """A model call; a streaming one records its chunks."""

    kind = "llm"

    def __init__(self, client: Rollout, root: Trace, parent: _Node, name: str,
                 data: dict[str, Any], *, stream: bool, record_chunks: bool) -> None:
        if stream:
            self._start_type, self._end_type = "llm.stream_start", "llm.stream_end"
        self.stream = stream
        self._record_chunks = record_chunks
        self._chunks: list[str] = []
        self._n_chunks = 0
        self._model = data.get("model")
        super().__init__(client, root, parent, name, data)

    def record_chunk(self, content: Any = None, **fields: Any) -> None:
        """One streamed chunk (text or a delta); its text also forms the output."""
        if isinstance(content, str):
            self._chunks.append(content)
        self._n_chunks += 1
        if self._record_chunks:
            self._emit("llm.stream_chunk", _clean(index=self._n_chunks - 1, content=content,
                                                  **fields))

    @property
    def text(self) -> str:
        """The text of the chunks recorded so far."""
        return "".join(self._chunks)

    def set_model(self, model: str) -> None:
        """The model that answered (when it differs from the one asked for)."""
        self._model = model

    def _end_data(self) -> dict[str, Any]:
        data = super()._end_data()
        if self._output is None and self._chunks:
            data["output"] = "".join(self._chunks)
        if self.stream:
            data["n_chunks"] = self._n_chunks
        if self._model is not None:
            data["model"] = self._model
        return data


class ToolCall(_Node):
    """One tool call: `tool.call` when it starts, `tool.result` when it ends."""

    kind = "tool"
    _start_type = "tool.call"
    _end_type = "tool.result"

    def __init__(self, client: Rollout, root: Trace, parent: _Node, name: str,
                 data: dict[str, Any]) -> None:
        self.tool_call_id = data.get("tool_call_id")
        self.retry_count = 0
        super().__init__(client, root, parent, name, data)

    def _end_data(self) -> dict[str, Any]:
        return _clean(tool_call_id=self.tool_call_id, retry_count=self.retry_count or None,
                      **super()._end_data())


class Trace(_Node):
    """One unit of work: a request, a conversation turn, a queue job, a benchmark attempt."""

    kind = "trace"
    _start_type = "trace.start"
    _end_type = "trace.end"

    def __init__(self, client: Rollout, name: str, data: dict[str, Any]) -> None:
        self._open: set[_Node] = set()
        self._seq = itertools.count()
        super().__init__(client, None, None, name, data)

    def next_seq(self) -> int:
        return next(self._seq)

    def end(self, output: Any = None) -> None:
        """End the trace; spans still open in it end first (status `unfinished`)."""
        for node in sorted(self._open, key=lambda n: -n.start_ns):
            if not node.ended:
                node._status = "unfinished"
                node.end()
        super().end(output)


class Rollout:
    """The tracing client of one agent: opens traces and exports them (OpenTelemetry).

    Args:
        agent_name: the agent's name (the exported `service.name`).
        environment: production, staging, benchmark...
        api_key: sent as `Authorization: Bearer <api_key>` to the collector.
        endpoint: an OTLP/HTTP collector (`http://host:4318`, `/v1/traces` added); default:
            `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`, else
            `http://localhost:4318` (benchflow's trace listener during `benchflow run -a http`).
        headers: more headers for the collector (default: `OTEL_EXPORTER_OTLP_HEADERS`).
        scrubber: applied to every string of every event before anything else sees it.
        before_send: gets each event (after the scrubber) and returns it, a changed copy,
            or None to drop it. Dropping a span's start event drops the span (its children
            attach to its parent); an exception in the hook drops the event.
        limits: bounds on payloads (`Limits`).
        exporter: an OpenTelemetry `SpanExporter` instead of OTLP/HTTP.
        span_processors: more OpenTelemetry `SpanProcessor`s that get every span too.
        enabled: False records nothing and exports nothing.
    """

    def __init__(self, agent_name: str | None = None, environment: str | None = None, *,
                 api_key: str | None = None, endpoint: str | None = None,
                 headers: Mapping[str, str] | None = None, scrubber: Scrubber | None = None,
                 before_send: BeforeSend | None = None, limits: Limits | None = None,
                 exporter: Any = None, span_processors: Iterable[Any] = (),
                 enabled: bool = True) -> None:
        self.agent_name = agent_name
        self.environment = environment
        self.scrubber = scrubber
        self.before_send = before_send
        self.limits = limits or Limits()
        self.enabled = enabled
        self._api_key = api_key
        self._endpoint = endpoint
        self._headers = dict(headers) if headers is not None else None
        self._exporter = exporter
        self._processors = list(span_processors)
        self._otel: OtelExport | None = None
        self._export_lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:  # never the api key
        return (f"Rollout(agent_name={self.agent_name!r}, environment={self.environment!r}, "
                f"endpoint={self.endpoint!r})")

    @property
    def endpoint(self) -> str:
        """Where spans go (OTLP/HTTP traces URL)."""
        return traces_url(self._endpoint)

    # -- traces ---------------------------------------------------------------------------

    def trace(self, name: str, *, trace_id: str | None = None,
              external_trace_id: str | None = None, user_id: str | None = None,
              session_id: str | None = None, conversation_id: str | None = None,
              attributes: Mapping[str, Any] | None = None,
              context: Mapping[str, Any] | None = None, input: Any = None,
              tags: Iterable[str] | None = None, traceparent: str | None = None,
              **fields: Any) -> Trace:
        """Open a trace (use it as `with` / `async with`, or call `.end()`).

        `trace_id` is the benchmark attempt's `traceId` when there is one: it becomes the
        trace's W3C id (see `normalize_trace_id`; the value given is kept as
        `source_trace_id` when it had to be hashed). `traceparent` (the W3C header
        benchflow sends with each attempt) makes the trace a child of the caller's span,
        and gives the trace id when `trace_id` is not given.
        """
        parent_ids = _parse_traceparent(traceparent)
        if trace_id is None and parent_ids is not None:
            trace_id = parent_ids[0]
        normalized = normalize_trace_id(trace_id)
        parent_span_id = parent_ids[1] if parent_ids and parent_ids[0] == normalized else None
        data = _clean(
            _trace_id=normalized, _parent_span_id=parent_span_id,
            source_trace_id=trace_id if trace_id and trace_id.lower() != normalized else None,
            agent_name=self.agent_name, environment=self.environment,
            external_trace_id=external_trace_id, user_id=user_id, session_id=session_id,
            conversation_id=conversation_id,
            attributes=dict(attributes) if attributes else None,
            context=dict(context) if context else None, tags=list(tags) if tags else None,
            **fields)
        node = Trace(self, name, data)
        if input is not None:
            node.record_input(input)
        return node

    def identify_user(self, user_id: str, traits: Mapping[str, Any] | None = None,
                      **fields: Any) -> None:
        """Stable user or account traits (`identity.update`), for segmentation and filters."""
        self.capture_event("identity.update", _clean(user_id=user_id,
                                                     traits=dict(traits) if traits else None,
                                                     **fields))

    def capture_event(self, type: str, data: Mapping[str, Any] | None = None, *,
                      name: str | None = None) -> None:
        """A low-level event (`metric`, `error`, `eval.result`, ...) in the current span;
        outside any trace it becomes a trace of its own.

        Raises:
            ValueError: `type` is not one of `CAPTURE_TYPES`.
        """
        if type not in CAPTURE_TYPES:
            raise ValueError(f"capture_event: unknown type {type!r}; one of "
                             f"{', '.join(CAPTURE_TYPES)} (spans have their own methods)")
        payload = dict(data or {})
        if name is not None:
            payload.setdefault("name", name)
        current = _current.get()
        if current is not None and not current.ended and current._client is self:
            current._emit(type, payload)
            return
        with self.trace(name or type, standalone=True) as trace:
            trace._emit(type, payload)

    # -- the pipeline -----------------------------------------------------------------------

    def _prepare(self, node: _Node, type: str, data: dict[str, Any], ns: int) -> Event | None:
        """The event as it will leave: JSON data, scrubbed, `before_send`, bounded."""
        if not self.enabled:
            return None
        event: Event = {"type": type, "ts": iso(ns), "seq": node._root.next_seq(),
                        "trace_id": node.trace_id, "span_id": node.span_id,
                        "parent_span_id": node.parent_span_id, "name": node.name,
                        "data": to_jsonable(data, max_depth=self.limits.max_depth)}
        try:
            if self.scrubber is not None:
                event["name"] = self.scrubber(event["name"])
                event["data"] = scrub_data(event["data"], self.scrubber)
            if self.before_send is not None:
                kept = self.before_send(event)
                if kept is None:
                    return None
                event = kept
        except Exception:  # noqa: BLE001 - a failing privacy hook drops, never leaks
            log.warning("tracing: scrubber/before_send failed on a %s event: dropped", type,
                        exc_info=True)
            return None
        return bound_event(event, self.limits)

    def _exporter_ready(self) -> OtelExport:
        with self._export_lock:
            if self._otel is None:
                from benchflow.tracing._otel import OtelExport

                self._otel = OtelExport(
                    service_name=self.agent_name or "agent", environment=self.environment,
                    endpoint=self._endpoint, api_key=self._api_key, headers=self._headers,
                    exporter=self._exporter, processors=self._processors,
                    limits=self.limits)
            return self._otel

    def _export(self, node: _Node) -> None:
        if node.dropped or not self.enabled or self._closed:
            return
        try:
            self._exporter_ready().export(node)
        except Exception:  # noqa: BLE001 - tracing never breaks the agent
            log.warning("tracing: could not export span %r", node.name, exc_info=True)

    # -- lifecycle ------------------------------------------------------------------------

    def check(self, timeout_sec: float = 5.0) -> CheckResult:
        """Whether the collector answers and accepts the credentials (an empty export);
        never raises. Call it during setup."""
        return check_endpoint(self.endpoint, self._request_headers(), timeout_sec)

    def _request_headers(self) -> dict[str, str]:
        return collector_headers(self._api_key, self._headers)

    def flush(self, timeout_sec: float = 10.0) -> bool:
        """Export every ended span now (short-lived processes, serverless handlers)."""
        if self._otel is None:
            return True
        return self._otel.flush(timeout_sec)

    def shutdown(self, timeout_sec: float = 10.0) -> None:
        """Flush, then stop exporting (call once, at exit)."""
        if self._closed:
            return
        self.flush(timeout_sec)
        self._closed = True
        if self._otel is not None:
            self._otel.shutdown()


__all__ = ["BeforeSend", "CheckResult", "Event", "LLMSpan", "Rollout", "Scrubber", "Span",
           "ToolCall", "Trace", "normalize_trace_id"]
