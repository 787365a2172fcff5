"""Reading `acp_trajectory.jsonl` back: the header, raw events, or merged events."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchflow.errors import ConfigError
from benchflow.trajectory.events import (
    AgentMessageEvent,
    AgentThoughtEvent,
    Event,
    TrajectoryHeader,
    event_adapter,
)


def read_header(path: Path) -> TrajectoryHeader:
    """The header (first line) of a trajectory file.

    Raises:
        ConfigError: the file is empty or its first line is not a v1 header.
    """
    with Path(path).open("rb") as fh:
        first = fh.readline()
    try:
        return TrajectoryHeader.model_validate_json(first)
    except ValueError as exc:
        raise ConfigError(f"{path}: first line is not a trajectory header: {exc}") from exc


def iter_events(path: Path) -> Iterator[Event]:
    """Every event in file order, unmerged, streaming (constant memory).

    A torn last line (the run was killed mid-write) is skipped; a bad line
    anywhere else raises `ConfigError` naming its line number.
    """
    with Path(path).open("rb") as fh:
        lines = iter(fh)
        header = next(lines, b"")
        if not header.strip():
            return
        for lineno, line in enumerate(lines, start=2):
            if not line.strip():
                continue
            try:
                yield event_adapter().validate_json(line)
            except ValueError as exc:
                if not line.endswith(b"\n"):  # torn final line: the writer was killed mid-write
                    return
                raise ConfigError(f"{path}:{lineno}: invalid trajectory event: {exc}") from exc


def load(path: Path) -> list[Event]:
    """All events of a trajectory in `seq` order, with message chunks merged.

    Consecutive `agent_message` (or `agent_thought`) events of the same scene,
    role, turn, round and session become one event: its text is the concatenation,
    `chunks` counts the pieces, and `seq`/`ts` are the first chunk's. Its `update`
    is the first chunk's update with the merged text as its content.
    """
    events = sorted(iter_events(path), key=lambda e: e.seq)
    merged: list[Event] = []
    run: list[AgentMessageEvent | AgentThoughtEvent] = []
    for event in events:
        if isinstance(event, AgentMessageEvent | AgentThoughtEvent) and _is_text(event.update):
            if run and not (type(run[0]) is type(event) and _same_place(run[0], event)):
                merged.append(_merge(run))
                run = []
            run.append(event)
            continue
        if run:
            merged.append(_merge(run))
            run = []
        merged.append(event)
    if run:
        merged.append(_merge(run))
    return merged


def _merge(run: list[AgentMessageEvent | AgentThoughtEvent]) -> Event:
    first = run[0]
    if len(run) == 1:
        return first
    text = "".join(e.text for e in run)
    update = {**first.update, "content": {**first.update["content"], "text": text}}
    return first.model_copy(
        update={"text": text, "chunks": sum(e.chunks for e in run), "update": update}
    )


def _same_place(a: Event, b: Event) -> bool:
    return (a.scene, a.role, a.turn, a.round, a.session_id) == (
        b.scene,
        b.role,
        b.turn,
        b.round,
        b.session_id,
    )


def _is_text(update: dict[str, Any]) -> bool:
    content = update.get("content")
    return isinstance(content, dict) and content.get("type") == "text"


__all__ = ["iter_events", "load", "read_header"]
