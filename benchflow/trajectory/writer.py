"""The streaming trajectory writer: one file, opened once, appended and flushed per event.

A killed run leaves a valid prefix (at most the lines not yet flushed are lost, and
the reader skips a torn last line). Nothing is kept in memory but the next sequence
number and the lines of the burst being written, so a rollout streaming millions of
updates stays flat. The ACP recorder writes a burst of updates unflushed and flushes
once the burst is drained, at most every `FLUSH_INTERVAL_SEC` (`write_line(...,
flush=False)`, then `flush()`): the lines are joined, masked and written at once, one
system call per interval rather than one per update or per read.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from benchflow.trace_ids import tool_call_span_id
from benchflow.trajectory.events import (
    EVENT_CLASSES,
    Event,
    TrajectoryHeader,
    UserMessageEvent,
    event_adapter,
    utc_now,
)


class TrajectoryWriter:
    """Appends `Event`s to `acp_trajectory.jsonl`, in the order they are written.

    The writer allocates sequence numbers (`next_seq()`) so that a caller can number
    an update when it arrives and write it later (an update buffered until its
    session is known keeps its wire position). Writes are synchronous: a line is
    handed to the OS before `write()` returns, which is what keeps the file a valid
    prefix when the process dies.

    Opening an existing non-empty file appends after its last event and continues
    its numbering; the header is written only to a new file.
    """

    def __init__(self, path: Path, header: TrajectoryHeader | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] | None = self.path.open("ab")
        # the open file's size, not a stat and an exists() of the path before it
        try:
            existing = os.fstat(self._file.fileno()).st_size
            self._seq = _last_seq(self.path) + 1 if existing else 0
        except BaseException:
            self._file.close()
            raise
        self.n_events = 0
        header = header or TrajectoryHeader()
        self.trace_id: str | None = header.trace_id
        self.span_id: str | None = header.span_id
        """The span events are attributed to (the current step's; the root span between steps)."""
        self.place: dict[str, Any] = {}
        """Scene, role, turn and round of the last prompt written (who is working now)."""
        self._places: dict[str | None, dict[str, Any]] = {}
        self.context: dict[str, Any] = {}
        """Fields stamped on every event written while set (an event's own value wins):
        `skills` of the running step, `task_step` of a multi-step task."""
        self.redact: Callable[[bytes], bytes] | None = None
        """Masks secrets in the lines before they are written, given one or more whole lines
        at a time (the rollout's `Redactor.lines`: the same bytes as line by line)."""
        self._held = bytearray()
        """Lines written with `flush=False`, not yet handed to the file (`flush`): one
        buffer, not an object per line (many short-lived small objects held across loop
        steps pin the allocator's arenas)."""
        if not existing:
            try:
                self._write_line(header.model_dump_json().encode())
            except OSError:  # a full disk: no descriptor left open behind the error
                self.close()
                raise

    def next_seq(self) -> int:
        """Reserve the next sequence number (call it when the thing happens, before any await)."""
        seq = self._seq
        self._seq += 1
        return seq

    def stamp(self, tool_call_id: str | None = None) -> dict[str, Any]:
        """The fields `write()` would add to a new event: the trace id and current span
        (a tool call's events: the tool call's own span) and `context`.

        Build an event with them (`event_from_update(..., **writer.stamp(id))`) and
        `write()` has nothing to add, so it does not copy the event.
        """
        stamp: dict[str, Any] = {}
        if self.trace_id is not None:
            stamp["trace_id"] = self.trace_id
            stamp["span_id"] = (tool_call_span_id(self.trace_id, tool_call_id)
                                if tool_call_id else self.span_id)
        for key, value in self.context.items():
            if value is not None:
                stamp[key] = value
        return stamp

    def write(self, event: Event, *, flush: bool = True) -> None:
        """Append one event; with `flush` (the default) hand it, and any unflushed
        events before it, to the OS before returning.

        Events without trace ids get the rollout's trace id and the current span
        (a tool call's events: the tool call's own span), and fields of `context`
        they lack (see `stamp()`).
        """
        stamp: dict[str, Any] = {}
        if self.trace_id is not None and event.trace_id is None:
            span = self.span_id
            tool_call_id = getattr(event, "tool_call_id", None)
            if tool_call_id:
                span = tool_call_span_id(self.trace_id, tool_call_id)
            stamp = {"trace_id": self.trace_id, "span_id": event.span_id or span}
        for key, value in self.context.items():
            if value is not None and getattr(event, key) is None:
                stamp[key] = value
        if stamp:
            event = event.model_copy(update=stamp)
        self._write_line(event.model_dump_json(exclude_none=True).encode(), flush)
        self.n_events += 1
        if isinstance(event, UserMessageEvent) and event.update is None:
            self.place = {"scene": event.scene, "role": event.role, "turn": event.turn,
                          "session_turn": event.session_turn, "round": event.round}
            self._places[event.role] = self.place

    def place_of(self, role: str | None) -> dict[str, Any]:
        """Scene, turn and round of `role`'s last prompt written ({} before its first):
        where a call made with the role's key belongs, whenever it arrives."""
        return self._places.get(role, {})

    def write_line(self, line: bytes, *, flush: bool = True) -> None:
        """Append one event already encoded as its JSON line (`events.update_line`, built
        with `stamp()`'s fields), like `write()`."""
        self._write_line(line, flush)
        self.n_events += 1

    def write_lines(self, lines: list[bytes]) -> None:
        """`write_line(line, flush=False)` for each of `lines`, in order, in one call."""
        if self._file is None:
            raise ValueError(f"trajectory writer for {self.path} is closed")
        held = self._held
        for line in lines:
            held += line
            held += b"\n"
        self.n_events += len(lines)

    def flush(self) -> None:
        """Hand events written with `flush=False` to the OS (no-op when closed)."""
        if self._file is not None:
            if self._held:
                self._write_held()
            self._file.flush()

    @property
    def unflushed_bytes(self) -> int:
        """The size of the lines written with `flush=False` since the last flush."""
        return len(self._held)

    def detach(self) -> Callable[[], None]:
        """Close the writer now (later writes are refused) and return what finishes the
        file: writing the unflushed lines, flushing and closing it (it blocks: a worker
        thread can call it). Calling that is `close()`'s work, with its errors."""
        file, self._file = self._file, None
        if file is None:
            return lambda: None
        held, self._held = self._held, bytearray()
        return functools.partial(_finish_file, file, self._masked(bytes(held)) if held else b"")

    def record(self, type: str, **fields: Any) -> Event:
        """Build, number, timestamp and write an event; returns it.

        `record("error", error_type=..., message=..., role="coder")`. Fields given
        explicitly (`seq`, `ts`) win over the allocated ones.
        """
        if "seq" not in fields:
            fields["seq"] = self.next_seq()
        if "ts" not in fields:
            fields["ts"] = utc_now()
        data = {"type": type, **fields}
        model = EVENT_CLASSES.get(type)  # one type's schema, not the whole union's
        event = model.model_validate(data) if model else event_adapter().validate_python(data)
        self.write(event)
        return event

    def _write_line(self, data: bytes, flush: bool = True) -> None:
        if self._file is None:
            raise ValueError(f"trajectory writer for {self.path} is closed")
        if not flush:
            self._held += data
            self._held += b"\n"
            return
        if self._held:  # after the lines written before it
            self._write_held()
        self._file.write(self._masked(data + b"\n"))
        self._file.flush()

    def _write_held(self) -> None:
        assert self._file is not None
        held, self._held = self._held, bytearray()
        self._file.write(self._masked(bytes(held)))

    def _masked(self, lines: bytes) -> bytes:
        """Whole lines (each ended by a newline) as the file holds them: secrets masked."""
        return self.redact(lines) if self.redact is not None else lines

    @property
    def closed(self) -> bool:
        return self._file is None

    def close(self) -> None:
        """Close the file (idempotent). On a full disk the unflushed tail is lost, the file
        is closed anyway and the OSError raised."""
        self.detach()()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _finish_file(file: IO[bytes], tail: bytes) -> None:
    """Write `tail`, then close `file`; on an error (a full disk) the descriptor is released
    all the same and the error raised."""
    try:
        if tail:
            file.write(tail)
        file.close()
    finally:
        if not file.closed:  # its write or flush failed
            file.raw.close()  # type: ignore[attr-defined]


def _last_seq(path: Path) -> int:
    """The highest `seq` in an existing file (-1 when it holds only a header)."""
    last = -1
    with path.open("rb") as fh:
        for line in fh:
            try:
                seq = json.loads(line).get("seq")
            except ValueError:
                continue
            if isinstance(seq, int) and seq > last:
                last = seq
    return last


__all__ = ["TrajectoryWriter"]
