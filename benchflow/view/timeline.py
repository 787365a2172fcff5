"""Who ran when in a multi-role rollout: one bar per turn (scene, role, turn, round), from
the first to the last trajectory event of that turn, placed on the rollout's time axis,
each naming who played the role (agent and model): from the result's `roles` when given,
else from the trajectory header's `roles` (a running trial has no result yet).

Only the fields a bar needs are read from each line (no event model is built), and the
result is cached per file size and time, so a live trial page re-reads a growing file
only when it grew.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import orjson

Identity = tuple[str, str | None]
"""Who played a role: (agent, model); the model None when unknown."""
_Key = tuple[str | None, str, int | None, int | None]
_CACHE: dict[tuple[str, int, int], tuple[list[TurnBar], dict[str, Identity]]] = {}


@dataclass(frozen=True)
class TurnBar:
    """One turn of one role: its start and length in seconds, and where its bar goes
    (`left`, `width`: percentages of the rollout's span)."""

    scene: str | None
    role: str
    turn: int | None
    round: int | None
    start_sec: float
    sec: float
    left: float
    width: float
    agent: str | None = None
    model: str | None = None


def _header_roles(header: dict) -> dict[str, Identity]:
    roles = header.get("roles")
    if not isinstance(roles, dict):
        return {}
    return {str(name): (str(r["agent"]), r.get("model")) for name, r in roles.items()
            if isinstance(r, dict) and r.get("agent")}


def _turns(path: Path) -> tuple[list[tuple[_Key, datetime, datetime]], dict[str, Identity]]:
    spans: dict[_Key, list[datetime]] = {}
    header: dict[str, Identity] = {}
    with path.open("rb") as fh:
        for line in fh:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a half-written last line of a running trial
            if not isinstance(event, dict):
                continue
            if event.get("type") == "header":
                header = _header_roles(event)
                continue
            role, ts = event.get("role"), event.get("ts")
            if not role or not ts or (event.get("turn") is None and event.get("round") is None):
                continue  # session-level events (the model chosen, ...) belong to no turn
            try:
                when = datetime.fromisoformat(ts)
            except (TypeError, ValueError):
                continue
            key = (event.get("scene"), role, event.get("turn"), event.get("round"))
            span = spans.setdefault(key, [when, when])
            span[0], span[1] = min(span[0], when), max(span[1], when)
    turns = sorted(((k, a, b) for k, (a, b) in spans.items()), key=lambda item: item[1])
    return turns, header


def role_timeline(path: Path, roles: Mapping[str, Identity] | None = None) -> list[TurnBar]:
    """The turns of the trajectory at `path`, in the order they started; empty when the
    file is missing or only one role ran (one role's timeline is the phases'). `roles`
    (from result.json's `roles`: the model actually used) names who played each role;
    roles it lacks are named from the trajectory header."""
    if not path.is_file():
        return []
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _CACHE:
        if len(_CACHE) > 256:
            _CACHE.clear()
        _CACHE[key] = _bars(path)
    bars, header = _CACHE[key]
    who = {**header, **(roles or {})}
    return [replace(bar, agent=who[bar.role][0], model=who[bar.role][1])
            if bar.role in who else bar for bar in bars]


def _bars(path: Path) -> tuple[list[TurnBar], dict[str, Identity]]:
    turns, header = _turns(path)
    bars: list[TurnBar] = []
    if len({role for (_, role, _, _), _, _ in turns}) > 1:
        start = min(a for _, a, _ in turns)
        total = max((b - start).total_seconds() for _, _, b in turns) or 1.0
        for (scene, role, turn, round_), began, ended in turns:
            offset, sec = (began - start).total_seconds(), (ended - began).total_seconds()
            bars.append(TurnBar(scene, role, turn, round_, offset, sec,
                                left=100 * offset / total, width=max(0.5, 100 * sec / total)))
    return bars, header


__all__ = ["Identity", "TurnBar", "role_timeline"]
