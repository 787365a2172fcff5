"""Trajectories: the JSONL record of everything agents did in a rollout.

`TrajectoryWriter` appends events as they happen; `load()` reads them back with
message chunks merged. The schema is in `events.py` and `docs/reference/trajectory.md`.
"""

from benchflow.trajectory.events import (
    SCHEMA_VERSION,
    AgentMessageEvent,
    AgentStateEvent,
    AgentThoughtEvent,
    CommandEvent,
    ErrorEvent,
    Event,
    EventType,
    OracleEvent,
    PermissionEvent,
    PlanEvent,
    ToolCallEvent,
    ToolCallUpdateEvent,
    ToolResultEvent,
    TrajectoryHeader,
    Usage,
    UsageEvent,
    UserMessageEvent,
    WorkspaceChangesEvent,
    event_from_update,
)
from benchflow.trajectory.reader import iter_events, load, read_header
from benchflow.trajectory.writer import TrajectoryWriter

__all__ = [
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
    "ToolCallEvent",
    "ToolCallUpdateEvent",
    "ToolResultEvent",
    "TrajectoryHeader",
    "TrajectoryWriter",
    "Usage",
    "UsageEvent",
    "UserMessageEvent",
    "WorkspaceChangesEvent",
    "event_from_update",
    "iter_events",
    "load",
    "read_header",
]
