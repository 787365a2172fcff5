"""A job's trace listener: spans of each attempt land in that attempt's rollout folder.

`JobTraces` is a `RolloutListener`: when a rollout starts it learns the rollout's trace
id (the `attempt.traceId` its endpoint receives) and its folder. Around the job:

```text
<job>/<agent>/<dataset>/<task>__<n>/trace_events.jsonl   each attempt's trace
<job>/unmatched_traces/<trace id>.jsonl                  spans of trace ids of no attempt
<job>/trace_listener.json                                what was received (counts), at the end
```
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

from benchflow.errors import ConfigError
from benchflow.rollout.events import RolloutEvent, RolloutEventKind
from benchflow.traces.listener import DEFAULT_LISTEN, TraceListener, parse_listen
from benchflow.traces.store import TraceStore

log = logging.getLogger(__name__)

UNMATCHED_DIR = "unmatched_traces"
COUNTS_FILE = "trace_listener.json"
QUIET_SEC = 1.0
"""At the job's end, the listener waits for this long without a request ..."""
LINGER_SEC = 5.0
"""... but no longer than this, for spans an endpoint exports after answering."""


def _chain(redactors: Iterable[Callable[[str], str]]) -> Callable[[str], str] | None:
    given = list(redactors)
    if not given:
        return None

    def redact(text: str) -> str:
        for fn in given:
            text = fn(text)
        return text

    return redact


class JobTraces:
    """The listener of one job (start it, give it as the job's listener, stop it)."""

    def __init__(self, job_dir: Path, listener: TraceListener, store: TraceStore) -> None:
        self.job_dir = job_dir
        self.listener = listener
        self.store = store

    @classmethod
    def start(cls, job_dir: Path, listen: str | None,
              redactors: Iterable[Callable[[str], str]] = ()) -> JobTraces | None:
        """Listen at `listen` (None: the default address; `none`: no listener).

        The default address taken by someone else is a warning (traces are then not
        joined); an address given explicitly that cannot be bound is an error.

        Raises:
            ConfigError: a bad `listen`, or an explicit one that cannot be bound.
        """
        address = parse_listen(listen if listen is not None else DEFAULT_LISTEN)
        if address is None:
            return None
        store = TraceStore(job_dir / UNMATCHED_DIR, redact=_chain(redactors))
        listener = TraceListener(store, *address)
        try:
            listener.start()
        except ConfigError as exc:
            if listen is not None:
                raise
            log.warning("%s; agent traces of this job are not collected", exc)
            return None
        return cls(job_dir, listener, store)

    @property
    def url(self) -> str:
        return self.listener.url

    def __call__(self, event: RolloutEvent) -> None:
        if event.kind is RolloutEventKind.START and event.result is not None \
                and event.result.trace_id:
            self.store.register(event.result.trace_id, self.job_dir / event.rollout_name)

    def stop(self) -> None:
        """Wait for the last spans (see `QUIET_SEC`), stop, write the counts."""
        try:
            self.listener.quiet_for(QUIET_SEC, LINGER_SEC)
        finally:
            self.listener.stop()
        counts = self.store.counts.as_dict()
        try:
            self.job_dir.mkdir(parents=True, exist_ok=True)
            (self.job_dir / COUNTS_FILE).write_text(json.dumps(
                {"url": self.url, **counts}, indent=2))
        except OSError:
            log.warning("traces: could not write %s", self.job_dir / COUNTS_FILE)
        bad = counts["malformed_requests"] + counts["oversized_requests"]
        if bad or counts["unmatched_spans"]:
            log.warning("trace listener: %d bad requests, %d spans of unknown trace ids "
                        "(kept in %s)", bad, counts["unmatched_spans"],
                        self.job_dir / UNMATCHED_DIR)


__all__ = ["COUNTS_FILE", "JobTraces", "UNMATCHED_DIR"]
