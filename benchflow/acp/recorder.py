"""Turning what arrives from the agent into trajectory events, in wire order.

`UpdateRecorder.on_receive` is the transport's synchronous hook: it sees every
incoming JSON-RPC message in the order it was read, numbers each session update
before anything can await, and writes it to the trajectory at once (or buffers it
while its session id is not yet known). It also keeps the little state the session
needs without holding events in memory: the time of the last message (idle
timeout), which tool calls are running, and per-turn counters.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import anyio

from benchflow.trace_ids import tool_call_span_id
from benchflow.trajectory.events import (
    CHUNK_TYPES,
    Event,
    chunk_line,
    stream_head,
    streamed_update_line,
    update_line,
)
from benchflow.trajectory.tool_calls import update_output
from benchflow.trajectory.writer import TrajectoryWriter

logger = logging.getLogger(__name__)

MAX_AGENT_TEXT_CHARS = 1_000_000
"""A turn's agent text kept for `PromptOutcome.agent_text` (the end is kept)."""

_RUNNING = (None, "pending", "in_progress")
_TOOL_CALL_KINDS = ("tool_call", "tool_call_update")


FLUSH_INTERVAL_SEC = 0.5
"""The longest a received update waits in memory before it is written to the trajectory."""
FLUSH_BYTES = 16 * 1024
"""Updates waiting to be written: this many bytes are written at once, interval or not."""

_MAX_TEXT_PARTS = 1024
_MAX_TRACKED_CALLS = 10_000


class UpdateRecorder:
    """Numbers and records session updates; tracks activity and per-turn counters."""

    def __init__(
        self, writer: TrajectoryWriter | None, *, scene: str | None, role: str | None
    ) -> None:
        self._writer = writer
        self._local_seq = 0
        self.scene = scene
        self.role = role
        self.turn: int | None = None
        self.session_turn: int | None = None
        self.round: int | None = None
        self.known_sessions: set[str] = set()
        self._pending: list[tuple[int, datetime, dict[str, Any], str, dict[str, Any]]] = []
        self._now = _clock()
        self._ticks = _FlushTicks.of_running_loop()
        self._flushed_at = float("-inf")
        self.last_activity = self._now()
        self._running_tools: set[str] = set()
        self._client_busy = 0
        self.n_updates = 0
        self.n_tool_calls = 0
        self.turn_tool_calls = 0
        self._text_parts: list[str] = []
        self._text_len = 0
        self.session_cost: float | None = None
        self.cost_currency: str | None = None
        self._call_state: dict[str, list[bool]] = {}
        """This turn's tool calls: id -> [has arguments, has output] (`tool_calls.py`)."""
        self._head_key: tuple[Any, ...] | None = None
        self._head: dict[str, Any] | None = None
        """The common fields of the updates written now, and what they were made from."""

    # ---- numbering and context

    def next_seq(self) -> int:
        if self._writer is not None:
            return self._writer.next_seq()
        self._local_seq += 1
        return self._local_seq - 1

    def context(self, session_id: str | None = None) -> dict[str, Any]:
        return {
            "scene": self.scene,
            "role": self.role,
            "turn": self.turn,
            "session_turn": self.session_turn,
            "round": self.round,
            "session_id": session_id,
        }

    def begin_turn(self, turn: int | None, round: int | None,
                   session_turn: int | None = None) -> None:
        self.turn, self.round, self.session_turn = turn, round, session_turn
        self.turn_tool_calls = 0
        self._call_state = {}
        self._text_parts, self._text_len = [], 0
        self.last_activity = self._now()

    # ---- the transport hook

    def on_receive(self, message: dict[str, Any]) -> None:
        """Called for every incoming message, in wire order, before the SDK sees it."""
        self.last_activity = self._now()
        if message.get("method") == "session/update":
            params = message.get("params")
            update = params.get("update") if isinstance(params, dict) else None
            if not isinstance(update, dict):
                logger.warning("session/update without an update object: %.200r", message)
                return
            session_id = params.get("sessionId")
            writer = self._writer  # numbered by the writer: one call, not two
            seq = writer.next_seq() if writer is not None else self.next_seq()
            ts = _utc_now()
            self.n_updates += 1
            kind = update.get("sessionUpdate")
            if kind == "agent_message_chunk":  # by the hundred: `_track`'s first case inline
                content = update.get("content")
                if isinstance(content, dict) and content.get("type") == "text":
                    self._add_text(str(content.get("text", "")))
            else:
                self._track(update)
            if isinstance(session_id, str) and session_id in self.known_sessions:
                self._write_now(seq, ts, session_id, update, kind)
            else:  # an id that is no string (a malformed agent's) is kept as its text
                sid = session_id if session_id is None else str(session_id)
                self._pending.append((seq, ts, self.context(sid), str(session_id), update))
            return
        result = message.get("result")
        if (
            "id" in message
            and isinstance(result, dict)
            and isinstance(result.get("sessionId"), str)
        ):
            self.add_session(result["sessionId"])  # a session/new (or fork) answer

    def on_updates(self, messages: list[dict[str, Any]]) -> None:
        """`on_receive` for a run of session/update notifications read one after another
        (the transport's `on_updates`), with the same effect: what is the same for the run
        (the clock, the writer, the turn's common fields) is looked up once, and a text
        chunk of a known session is written here with no call per update but its encoding;
        any other update goes through `on_receive`."""
        self.last_activity = self._now()
        writer = self._writer
        if writer is None or writer.closed:
            for message in messages:
                self._receive_one(message)
            return
        lines: list[bytes] = []
        parts = self._text_parts
        head_sid: Any = None
        head: dict[str, Any] | None = None
        for message in messages:
            try:  # a text chunk? (only a dict answers these subscripts: else the general path)
                update = message["params"]["update"]
                content = update["content"]
                text = content["text"]
                chunk_type = CHUNK_TYPES[update["sessionUpdate"]]
                session_id = message["params"]["sessionId"]
                if content["type"] != "text" or type(text) is not str:
                    raise TypeError
                if session_id != head_sid:
                    head_sid, head = session_id, None
                    if type(session_id) is str and session_id in self.known_sessions:
                        head = self._stream_head(writer, session_id)
                if head is None:  # a session not known yet (buffered), or no streamed head
                    raise TypeError
            except (KeyError, TypeError):  # not a text chunk of a known session
                if lines:  # in wire order: what came before it first
                    writer.write_lines(lines)
                    lines = []
                self._receive_one(message)
                continue
            seq = writer.next_seq()
            ts = _utc_now()
            self.n_updates += 1
            if chunk_type == "agent_message":  # the turn's text (`_add_text`)
                parts.append(text)
                self._text_len += len(text)
            try:
                lines.append(chunk_line(seq, ts, head, chunk_type, text, update))
            except TypeError:  # a value orjson cannot write: through the model
                if lines:
                    writer.write_lines(lines)
                    lines = []
                self._write_update(seq, ts, self.context(session_id), update)
        if lines:
            writer.write_lines(lines)
        if self._text_len > 2 * MAX_AGENT_TEXT_CHARS or len(parts) > _MAX_TEXT_PARTS:
            self._add_text("")  # joined as `_add_text` does

    def _receive_one(self, message: dict[str, Any]) -> None:
        try:
            self.on_receive(message)
        except Exception:  # a recording failure must not stop the rest of the run
            logger.exception("recording an update failed")

    def add_session(self, session_id: str) -> None:
        """Mark a session id known and write the updates buffered for it, in arrival order."""
        if session_id in self.known_sessions:
            return
        self.known_sessions.add(session_id)
        keep = []
        for seq, ts, ctx, sid, update in self._pending:
            if sid == session_id:
                self._write_update(seq, ts, ctx, update)
            else:
                keep.append((seq, ts, ctx, sid, update))
        self._pending = keep

    def flush_pending(self) -> None:
        """Write updates whose session never became known (at close: nothing is dropped)."""
        pending, self._pending = self._pending, []
        for seq, ts, ctx, _sid, update in pending:
            self._write_update(seq, ts, ctx, update)
        self._flush_now()

    def _write_update(
        self, seq: int, ts: datetime, ctx: dict[str, Any], update: dict[str, Any]
    ) -> None:
        writer = self._writer
        if writer is None or writer.closed:
            return
        tool_call_id = None
        if update.get("sessionUpdate") in _TOOL_CALL_KINDS:  # events with a tool_call_id
            tool_call_id = update.get("toolCallId")
            tool_call_id = None if tool_call_id is None else str(tool_call_id)
        # stamped as built (trace ids, skills...): the writer need not copy the event
        stamp = writer.stamp(tool_call_id)
        try:
            line = update_line(update, seq=seq, ts=ts, **ctx, **stamp)
        except ValueError:  # malformed beyond what the converter tolerates: keep it raw
            line = update_line({"sessionUpdate": "invalid", "raw": update}, seq=seq, ts=ts,
                               **ctx, **writer.stamp())
        writer.write_line(line, flush=False)  # flushed when the burst is drained (`flush`)

    def _write_now(self, seq: int, ts: datetime, session_id: str, update: dict[str, Any],
                   kind: Any) -> None:
        """`_write_update` in the current context: the common fields of the turn's message
        chunks are gathered once (`stream_head`), not per update. `kind`: the update's
        `sessionUpdate`."""
        writer = self._writer
        if writer is None or writer.closed:
            return
        head = self._stream_head(writer, session_id)
        if head is not None and kind in _TOOL_CALL_KINDS:  # a tool call: its own span
            head = _with_tool_span(head, writer.trace_id, update.get("toolCallId"))
        if head is not None:
            line = streamed_update_line(update, seq, ts, head)
            if line is not None:
                writer.write_line(line, flush=False)
                return
        self._write_update(seq, ts, self.context(session_id), update)

    def _stream_head(self, writer: TrajectoryWriter, session_id: str) -> dict[str, Any] | None:
        """The common fields of `session_id`'s message chunks written now (`stream_head`),
        made again only when one of them changed; None: they cannot be streamed."""
        key = (self.scene, self.role, self.turn, self.session_turn, self.round, session_id,
               writer.trace_id, writer.span_id, *writer.context.items())
        if key != self._head_key:
            ctx, stamp = self.context(session_id), writer.stamp()
            self._head_key = key
            self._head = None if ctx.keys() & stamp.keys() else stream_head(**ctx, **stamp)
        return self._head

    def flush(self) -> None:
        """Hand the updates written so far to the OS: the transport calls this before it
        waits for more of the agent's output. At most one write every `FLUSH_INTERVAL_SEC`
        unless `FLUSH_BYTES` wait: a burst read sooner after the last write is written by
        a timer at the interval's end (or with the next event benchflow records, or at
        close), so an agent streaming a token per read costs a system call per interval,
        not per read."""
        writer = self._writer
        if writer is None or not (held := writer.unflushed_bytes):
            return
        if (held >= FLUSH_BYTES  # memory per rollout in flight stays small
                or self._ticks is None
                or self._now() >= self._flushed_at + FLUSH_INTERVAL_SEC):
            self._flush_now()
        else:
            self._ticks.hold(self)

    def _flush_now(self) -> None:
        if self._ticks is not None:
            self._ticks.release(self)
        if self._writer is not None:
            self._writer.flush()
        self._flushed_at = self._now()

    def _track(self, update: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            content = update.get("content")
            if isinstance(content, dict) and content.get("type") == "text":
                self._add_text(str(content.get("text", "")))
        elif kind == "tool_call":
            self.n_tool_calls += 1
            self.turn_tool_calls += 1
            if update.get("status") in _RUNNING:
                self._running_tools.add(str(update.get("toolCallId")))
            self._note_call(update)
        elif kind == "tool_call_update":
            if update.get("status") in ("completed", "failed"):
                self._running_tools.discard(str(update.get("toolCallId")))
                self._touch_if_idle()
            self._note_call(update)
        elif kind == "usage_update":
            cost = update.get("cost")
            if isinstance(cost, dict) and isinstance(cost.get("amount"), int | float):
                self.session_cost = float(cost["amount"])
                self.cost_currency = cost.get("currency")

    def _note_call(self, update: dict[str, Any]) -> None:
        if len(self._call_state) > _MAX_TRACKED_CALLS:
            return
        state = self._call_state.setdefault(str(update.get("toolCallId")), [False, False])
        raw_input = update.get("rawInput")
        state[0] = state[0] or (raw_input is not None and raw_input not in ({}, "", []))
        # what the opening tool_call carries is a preview, not the result (tool_calls.py)
        state[1] = state[1] or (update.get("sessionUpdate") == "tool_call_update"
                                and bool(update_output(update)))

    def incomplete_tool_calls(self) -> list[str]:
        """Ids of this turn's tool calls whose updates carried no arguments or no output
        (benchflow fills those from the model calls, when it sees them)."""
        return [i for i, (args, output) in self._call_state.items() if not (args and output)]

    def _add_text(self, text: str) -> None:
        self._text_parts.append(text)
        self._text_len += len(text)
        # Join often: 100,000 one-character chunks as separate str objects cost ~5 MB.
        if self._text_len > 2 * MAX_AGENT_TEXT_CHARS or len(self._text_parts) > _MAX_TEXT_PARTS:
            joined = "".join(self._text_parts)[-MAX_AGENT_TEXT_CHARS:]
            self._text_parts, self._text_len = [joined], len(joined)

    def turn_text(self) -> str:
        return "".join(self._text_parts)[-MAX_AGENT_TEXT_CHARS:]

    # ---- activity (idle timeout)

    @property
    def busy(self) -> bool:
        """A tool call is running (agent-reported, or a client request being served)."""
        return bool(self._running_tools) or self._client_busy > 0

    @contextmanager
    def client_busy(self) -> Iterator[None]:
        """Mark the client serving a request (terminal wait, fs, permission) as activity."""
        self._client_busy += 1
        try:
            yield
        finally:
            self._client_busy -= 1
            self._touch_if_idle()

    def _touch_if_idle(self) -> None:
        if not self.busy:
            self.last_activity = self._now()

    # ---- events benchflow itself records

    def record(self, type: str, session_id: str | None = None, **fields: Any) -> Event | None:
        """Write a benchflow-side event (user_message, permission, error...) in context."""
        if self._writer is None or self._writer.closed:
            return None
        return self._writer.record(type, seq=self.next_seq(), **self.context(session_id), **fields)


class _FlushTicks:
    """One timer per event loop that writes the held bursts of every recorder (no timer,
    handle or context per rollout in flight): it ticks every `FLUSH_INTERVAL_SEC` while
    any burst is held."""

    _current: _FlushTicks | None = None

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.held: dict[UpdateRecorder, None] = {}
        self.armed = False

    @classmethod
    def of_running_loop(cls) -> _FlushTicks | None:
        """The running asyncio loop's (None: another backend, every burst written)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        if cls._current is None or cls._current.loop is not loop:
            cls._current = cls(loop)
        return cls._current

    def hold(self, recorder: UpdateRecorder) -> None:
        self.held[recorder] = None
        if not self.armed:
            self.armed = True
            self.loop.call_later(FLUSH_INTERVAL_SEC, self._tick)

    def release(self, recorder: UpdateRecorder) -> None:
        self.held.pop(recorder, None)

    def _tick(self) -> None:
        self.armed = False
        held, self.held = self.held, {}
        for recorder in held:
            try:
                recorder._flush_now()
            except Exception:  # a full disk: that rollout's writer reports it at close
                logger.exception("writing held trajectory updates failed")


def _with_tool_span(head: dict[str, Any], trace_id: str | None, tool_call_id: Any
                    ) -> dict[str, Any] | None:
    """`head` for a tool call's update: its span is the tool call's own, as
    `writer.stamp(tool_call_id)` gives it; None when that span has no place in `head`."""
    if trace_id is None or tool_call_id is None or not (key := str(tool_call_id)):
        return head  # the step's span, as for any update
    if "span_id" not in head:  # no step span: its place in the field order is unknown
        return None
    return {**head, "span_id": tool_call_span_id(trace_id, key)}


_utc_now = functools.partial(datetime.now, UTC)
"""`utc_now` without a Python frame (called for every update)."""


def _clock() -> Callable[[], float]:
    """`anyio.current_time`'s clock, looked up once (it is read for every message): on
    asyncio, the running loop's own `time`."""
    try:
        return asyncio.get_running_loop().time
    except RuntimeError:  # another backend (trio)
        return anyio.current_time


__all__ = ["FLUSH_BYTES", "FLUSH_INTERVAL_SEC", "MAX_AGENT_TEXT_CHARS", "UpdateRecorder"]
