"""W3C trace identity of a job and its rollouts.

Every job has a run id; every rollout a trace id (32 lowercase hex digits) and a
root span id (16 hex). Steps and tool calls get their own span ids inside the
rollout's trace. The same ids go to result.json, the trajectory, the agents
(`TRACEPARENT`, the HTTP payload) and, with the `otel` extra, to exported spans.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from dataclasses import dataclass

TRACE_ID = re.compile(r"^[0-9a-f]{32}$")
SPAN_ID = re.compile(r"^[0-9a-f]{16}$")


_RANDOM_BATCH = 4096
_random = bytearray()
_random_lock = threading.Lock()


def random_hex(n_bytes: int) -> str:
    """`secrets.token_hex(n_bytes)`: the operating system's random bytes, each used once,
    drawn 4 KiB at a time. Every rollout takes a few (its ids, its agent's env file name),
    and each draw is a system call that lets a worker thread take the GIL from the event
    loop."""
    with _random_lock:
        if len(_random) < n_bytes:
            _random[:] = os.urandom(max(_RANDOM_BATCH, n_bytes))
        drawn = bytes(_random[:n_bytes])
        del _random[:n_bytes]
    return drawn.hex()


if hasattr(os, "register_at_fork"):  # a forked child must not draw its parent's bytes again
    os.register_at_fork(after_in_child=_random.clear)


def new_run_id() -> str:
    """A job's run id: `run_` and 24 hex digits."""
    return f"run_{random_hex(12)}"


def new_trace_id() -> str:
    """A random W3C trace id (never all zeros)."""
    while True:
        value = random_hex(16)
        if value.strip("0"):
            return value


def new_span_id() -> str:
    """A random W3C span id (never all zeros)."""
    while True:
        value = random_hex(8)
        if value.strip("0"):
            return value


def derived_span_id(trace_id: str, key: str) -> str:
    """A span id fixed by `trace_id` and `key`, so every event of one thing shares it."""
    value = hashlib.sha256(f"{trace_id}/{key}".encode()).hexdigest()[:16]
    return value if value.strip("0") else "0000000000000001"


def tool_call_span_id(trace_id: str, tool_call_id: str) -> str:
    """The span id of one tool call (its start and updates carry the same id)."""
    return derived_span_id(trace_id, f"tool/{tool_call_id}")


def step_span_id(trace_id: str, scene_index: int, turn_index: int, round: int | None = None) -> str:
    """The span id of one step (a turn of a role in a scene, optionally a user round)."""
    return derived_span_id(trace_id, f"step/{scene_index}/{turn_index}/{round}")


def traceparent(trace_id: str, span_id: str, sampled: bool = True) -> str:
    """The W3C `traceparent` header value: `00-<trace id>-<span id>-<flags>`."""
    return f"00-{trace_id}-{span_id}-{'01' if sampled else '00'}"


@dataclass(frozen=True)
class TraceIds:
    """One rollout's identity: the job's run id, the rollout's trace id and root span id."""

    run_id: str
    trace_id: str
    span_id: str

    @classmethod
    def new(cls, run_id: str | None = None) -> TraceIds:
        return cls(run_id=run_id or new_run_id(), trace_id=new_trace_id(), span_id=new_span_id())

    @property
    def traceparent(self) -> str:
        return traceparent(self.trace_id, self.span_id)


__all__ = ["SPAN_ID", "TRACE_ID", "TraceIds", "derived_span_id", "new_run_id", "new_span_id",
           "new_trace_id", "step_span_id", "tool_call_span_id", "traceparent"]
