"""Who ran when in a multi-role rollout: one bar per turn (scene, role, turn, round), from
the first to the last trajectory event of that turn, placed on the rollout's time axis.

Only the fields a bar needs are read from each line (no event model is built), and the
result is cached per file size and time, so a live trial page re-reads a growing file
only when it grew.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson

_CACHE: dict[tuple[str, int, int], list[TurnBar]] = {}


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


def _turns(path: Path) -> list[tuple[tuple[str | None, str, int | None, int | None],
                                    datetime, datetime]]:
    spans: dict[tuple[str | None, str, int | None, int | None], list[datetime]] = {}
    with path.open("rb") as fh:
        for line in fh:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue  # a half-written last line of a running trial
            if not isinstance(event, dict) or event.get("type") == "header":
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
    return sorted(((k, a, b) for k, (a, b) in spans.items()), key=lambda item: item[1])


def role_timeline(path: Path) -> list[TurnBar]:
    """The turns of the trajectory at `path`, in the order they started; empty when the
    file is missing or only one role ran (one role's timeline is the phases')."""
    if not path.is_file():
        return []
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key in _CACHE:
        return _CACHE[key]
    turns = _turns(path)
    bars: list[TurnBar] = []
    if len({role for (_, role, _, _), _, _ in turns}) > 1:
        start = min(a for _, a, _ in turns)
        total = max((b - start).total_seconds() for _, _, b in turns) or 1.0
        for (scene, role, turn, round_), began, ended in turns:
            offset, sec = (began - start).total_seconds(), (ended - began).total_seconds()
            bars.append(TurnBar(scene, role, turn, round_, offset, sec,
                                left=100 * offset / total, width=max(0.5, 100 * sec / total)))
    if len(_CACHE) > 256:
        _CACHE.clear()
    _CACHE[key] = bars
    return bars


__all__ = ["TurnBar", "role_timeline"]
