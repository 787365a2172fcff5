"""Agent traces joined to attempts: an OTLP/HTTP receiver that files each span into the
rollout folder of its trace id (`trace_events.jsonl`), and readers for the viewer and
exports.

```python
store = TraceStore(job_dir / "unmatched_traces")
with TraceListener(store, "127.0.0.1", 0) as listener:   # listener.url for the SDKs
    store.register(result.trace_id, rollout_folder)
```

Nothing here imports OpenTelemetry unless a protobuf request arrives.
"""

from benchflow.traces.index import JobsIndex
from benchflow.traces.listener import DEFAULT_LISTEN, MAX_BODY_BYTES, TraceListener, parse_listen
from benchflow.traces.reader import SpanNode, read_events, span_tree
from benchflow.traces.store import TRACE_EVENTS, TraceCounts, TraceStore

__all__ = ["DEFAULT_LISTEN", "MAX_BODY_BYTES", "TRACE_EVENTS", "JobsIndex", "SpanNode",
           "TraceCounts", "TraceListener", "TraceStore", "parse_listen", "read_events",
           "span_tree"]
