"""Filing received spans: each trace id's events go to its attempt's rollout folder.

```text
<rollout folder>/trace_events.jsonl       the attempt's trace, one taxonomy event a line
<unmatched_dir>/<trace id>.jsonl          events of trace ids no attempt has (yet)
```

Files are appended to as spans arrive (spans arrive when they end, children before
parents: readers order by `ts` and `seq`, see `reader.py`). A trace id learned after
its events arrived (`register`) gets them moved from the unmatched folder into the
rollout's file. Every event is bounded (`Limits`) and passed through `redact`
(benchflow's secrets: the http agent's header values) before it is written.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchflow.tracing._taxonomy import Limits, bound_event, scrub_data
from benchflow.traces.convert import span_events
from benchflow.traces.otlp import ReceivedSpan

log = logging.getLogger(__name__)

TRACE_EVENTS = "trace_events.jsonl"
"""A rollout's trace, beside its result.json."""

Resolver = Callable[[str], "Path | None"]


@dataclass
class TraceCounts:
    """What a listener received: every request and span is counted, none silently lost."""

    requests: int = 0
    spans: int = 0
    events: int = 0
    matched_spans: int = 0
    unmatched_spans: int = 0
    foreign_spans: int = 0
    """Spans from other OpenTelemetry instrumentation (mapped, see `convert.py`)."""
    truncated_events: int = 0
    malformed_requests: int = 0
    oversized_requests: int = 0
    write_errors: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class TraceStore:
    """Files spans by trace id; thread-safe (the listener's request threads share it)."""

    def __init__(self, unmatched_dir: Path, *, resolver: Resolver | None = None,
                 redact: Callable[[str], str] | None = None,
                 limits: Limits | None = None) -> None:
        self.unmatched_dir = unmatched_dir
        self.resolver = resolver
        self.redact = redact
        self.limits = limits or Limits()
        self.counts = TraceCounts()
        self._folders: dict[str, Path] = {}
        self._lock = threading.Lock()

    def register(self, trace_id: str, folder: Path) -> None:
        """`trace_id`'s events go to `folder` (and any that came before are moved there)."""
        with self._lock:
            self._folders[trace_id] = folder
            pending = self.unmatched_dir / f"{trace_id}.jsonl"
            if pending.is_file():
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                    with (folder / TRACE_EVENTS).open("ab") as out:
                        out.write(pending.read_bytes())
                    pending.unlink()
                except OSError:
                    log.warning("traces: could not move %s into %s", pending, folder,
                                exc_info=True)

    def folder_of(self, trace_id: str) -> Path | None:
        """The rollout folder of `trace_id`, if known (asking the resolver once more)."""
        folder = self._folders.get(trace_id)
        if folder is None and self.resolver is not None:
            folder = self.resolver(trace_id)
            if folder is not None:
                self.register(trace_id, folder)
        return folder

    def _line(self, event: dict[str, Any]) -> bytes:
        bounded = bound_event(event, self.limits)
        if bounded["data"].get("truncated") and not event["data"].get("truncated"):
            self.counts.truncated_events += 1
        if self.redact is not None:
            bounded = {**bounded, "name": self.redact(str(bounded.get("name"))),
                       "data": scrub_data(bounded["data"], self.redact)}
        return (json.dumps(bounded, ensure_ascii=False, separators=(",", ":")) + "\n").encode()

    def add(self, spans: list[ReceivedSpan]) -> None:
        """File the spans of one request (grouped so each file is opened once)."""
        groups: dict[Path, list[bytes]] = {}
        for span in spans:
            events, from_sdk = span_events(span)
            folder = self.folder_of(span.trace_id)
            with self._lock:
                self.counts.spans += 1
                self.counts.foreign_spans += not from_sdk
                if folder is None:
                    self.counts.unmatched_spans += 1
                    target = self.unmatched_dir / f"{span.trace_id}.jsonl"
                else:
                    self.counts.matched_spans += 1
                    target = folder / TRACE_EVENTS
                lines = [self._line(e) for e in events]
                self.counts.events += len(lines)
            groups.setdefault(target, []).extend(lines)
        with self._lock:
            for target, lines in groups.items():
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with target.open("ab") as out:
                        out.write(b"".join(lines))
                except OSError:
                    self.counts.write_errors += 1
                    log.warning("traces: could not write %s", target, exc_info=True)


__all__ = ["TRACE_EVENTS", "Resolver", "TraceCounts", "TraceStore"]
