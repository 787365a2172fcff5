"""The trace listener: OTLP/HTTP in (protobuf, JSON, gzip), spans filed by trace id, bad
input answered, counted and kept apart, never a crash."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx
import pytest

from benchflow.errors import ConfigError
from benchflow.traces import (
    TRACE_EVENTS,
    JobsIndex,
    TraceListener,
    TraceStore,
    parse_listen,
    read_events,
    span_tree,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER = "0af7651916cd43dd8448eb211c80319c"


def otlp_json(trace_id: str, spans: list[dict]) -> dict:
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name",
                                     "value": {"stringValue": "svc"}}]},
        "scopeSpans": [{"scope": {"name": "test"}, "spans": [
            {"traceId": trace_id, **span} for span in spans]}]}]}


FOREIGN = [
    {"spanId": "1111111111111111", "name": "POST /eval", "startTimeUnixNano": "1000",
     "endTimeUnixNano": "9000", "attributes": [
         {"key": "http.method", "value": {"stringValue": "POST"}}]},
    {"spanId": "2222222222222222", "parentSpanId": "1111111111111111", "name": "chat gpt-4",
     "startTimeUnixNano": "2000", "endTimeUnixNano": "5000", "attributes": [
         {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
         {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4"}},
         {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "12"}},
         {"key": "gen_ai.usage.output_tokens", "value": {"intValue": 3}}],
     "events": [{"name": "exception", "timeUnixNano": "4000", "attributes": [
         {"key": "exception.type", "value": {"stringValue": "TimeoutError"}},
         {"key": "exception.message", "value": {"stringValue": "slow"}}]}],
     "status": {"code": 2, "message": "slow"}},
    {"spanId": "3333333333333333", "parentSpanId": "1111111111111111", "name": "get_weather",
     "startTimeUnixNano": "6000", "endTimeUnixNano": "7000", "attributes": [
         {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
         {"key": "gen_ai.tool.call.id", "value": {"stringValue": "call_9"}}]},
]


@pytest.fixture
def listening(tmp_path):
    store = TraceStore(tmp_path / "unmatched", redact=lambda s: s.replace("hdr-secret", "***"))
    with TraceListener(store, "127.0.0.1", 0, max_body_bytes=64 * 1024) as listener:
        yield listener, store, tmp_path


def post(listener, body: bytes, content_type="application/json", **headers):
    return httpx.post(f"{listener.url}/v1/traces", content=body,
                      headers={"Content-Type": content_type, **headers})


def test_foreign_otel_spans_are_mapped_to_the_taxonomy(listening):
    listener, store, tmp = listening
    store.register(TRACE, tmp / "rollout")
    answer = post(listener, json.dumps(otlp_json(TRACE, FOREIGN)).encode())
    assert answer.status_code == 200 and answer.json() == {}
    events = read_events(tmp / "rollout" / TRACE_EVENTS)
    (root,) = span_tree(events)
    assert root.name == "POST /eval" and root.start["data"]["attributes"] == {
        "http.method": "POST"}
    llm, tool = root.children
    assert llm.kind == "llm" and llm.usage == {"input_tokens": 12, "output_tokens": 3}
    assert llm.status == "error" and llm.start["data"]["model"] == "gpt-4"
    assert [(e["type"], e["data"]) for e in llm.events] == [
        ("error", {"error_type": "TimeoutError", "message": "slow"})]
    assert tool.kind == "tool" and tool.start["data"]["tool_call_id"] == "call_9"
    assert {e["source"] for e in events} == {"otel"} and events[0]["service"] == "svc"
    assert store.counts.foreign_spans == 3 and store.counts.matched_spans == 3


def test_unknown_trace_ids_are_kept_apart_and_joined_when_learned(listening):
    listener, store, tmp = listening
    post(listener, json.dumps(otlp_json(OTHER, FOREIGN[:1])).encode())
    pending = tmp / "unmatched" / f"{OTHER}.jsonl"
    assert pending.is_file() and store.counts.unmatched_spans == 1
    store.register(OTHER, tmp / "late")
    assert not pending.exists()
    assert [e["type"] for e in read_events(tmp / "late" / TRACE_EVENTS)] == [
        "span.start", "span.end"]


def test_gzip_bodies_and_protobuf(listening):
    pytest.importorskip("opentelemetry.proto")
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    listener, store, tmp = listening
    store.register(TRACE, tmp / "r")
    request = ExportTraceServiceRequest(resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(
        spans=[Span(trace_id=bytes.fromhex(TRACE), span_id=bytes.fromhex("ab" * 8),
                    name="step hdr-secret", start_time_unix_nano=1, end_time_unix_nano=2)])])])
    answer = post(listener, gzip.compress(request.SerializeToString()),
                  "application/x-protobuf", **{"Content-Encoding": "gzip"})
    assert answer.status_code == 200
    events = read_events(tmp / "r" / TRACE_EVENTS)
    assert [(e["type"], e["name"]) for e in events] == [("span.start", "step ***"),
                                                         ("span.end", "step ***")]


@pytest.mark.parametrize(("body", "content_type", "status", "counter"), [
    (b"{not json", "application/json", 400, "malformed_requests"),
    (b"[1, 2]", "application/json", 400, "malformed_requests"),
    (json.dumps(otlp_json("zz", FOREIGN)).encode(), "application/json", 400,
     "malformed_requests"),
    (b"\x0a\xff\xff\xff", "application/x-protobuf", 400, "malformed_requests"),
    (b"{}", "text/plain", 400, "malformed_requests"),
    (b"x" * (64 * 1024 + 1), "application/json", 413, "oversized_requests"),
    (gzip.compress(b" " * (200 * 1024)), "application/json", 413, "oversized_requests"),
])
def test_bad_requests_are_answered_and_counted(listening, body, content_type, status, counter):
    listener, store, tmp = listening
    headers = {"Content-Encoding": "gzip"} if body[:2] == b"\x1f\x8b" else {}
    answer = post(listener, body, content_type, **headers)
    assert answer.status_code == status
    assert getattr(store.counts, counter) == 1
    # and the listener still works
    store.register(TRACE, tmp / "ok")
    assert post(listener, json.dumps(otlp_json(TRACE, FOREIGN[:1])).encode()).status_code == 200
    health = httpx.get(f"{listener.url}/health").json()
    assert health[counter] == 1 and health["matched_spans"] == 1


def test_oversized_events_are_truncated_and_counted(listening):
    listener, store, tmp = listening
    store.register(TRACE, tmp / "r")
    big = [{**FOREIGN[0], "attributes": [{"key": "blob", "value": {"stringValue": "z" * 40000}}]}]
    post(listener, json.dumps(otlp_json(TRACE, big)).encode())
    (start, _) = read_events(tmp / "r" / TRACE_EVENTS)
    assert start["data"]["truncated"] is True and len(start["data"]["attributes"]["blob"]) < 17000
    assert store.counts.truncated_events == 1


def test_an_sdk_span_with_a_broken_payload_is_still_filed(listening):
    listener, store, tmp = listening
    store.register(TRACE, tmp / "r")
    broken = [{**FOREIGN[0], "attributes": [
        {"key": "rollout.kind", "value": {"stringValue": "span"}},
        {"key": "rollout.start", "value": {"stringValue": "{nope"}}]}]
    assert post(listener, json.dumps(otlp_json(TRACE, broken)).encode()).status_code == 200
    assert [e["type"] for e in read_events(tmp / "r" / TRACE_EVENTS)] == [
        "span.start", "span.end"]


def test_the_jobs_index_finds_rollouts_by_their_trajectory_header(tmp_path):
    rollout = tmp_path / "job" / "http" / "ds" / "task__1"
    (rollout / "trajectory").mkdir(parents=True)
    index = JobsIndex(tmp_path, rescan_sec=0)
    assert index(TRACE) is None
    (rollout / "trajectory" / "acp_trajectory.jsonl").write_text(
        json.dumps({"schema_version": 2, "trace_id": TRACE}) + "\n")
    assert index(TRACE) == rollout
    (tmp_path / "job" / "http" / "ds" / "task__2").mkdir()
    (tmp_path / "job" / "http" / "ds" / "task__2" / "result.json").write_text(
        json.dumps({"trace_id": OTHER}))
    assert index(OTHER) == tmp_path / "job" / "http" / "ds" / "task__2"


@pytest.mark.parametrize(("value", "expected"), [
    ("127.0.0.1:4318", ("127.0.0.1", 4318)), ("9000", ("127.0.0.1", 9000)),
    ("none", None), ("[::1]:0", ("::1", 0))])
def test_parse_listen(value, expected):
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", ["host:port", "1.2.3.4:70000", ":"])
def test_parse_listen_rejects(value):
    with pytest.raises(ConfigError, match="--trace-listen"):
        parse_listen(value)


def test_a_taken_address_is_a_config_error(tmp_path):
    store = TraceStore(tmp_path)
    with TraceListener(store, "127.0.0.1", 0) as first:
        with pytest.raises(ConfigError, match="cannot listen"):
            TraceListener(store, "127.0.0.1", first.port).start()


def test_files_are_never_rewritten(listening):
    listener, store, tmp = listening
    store.register(TRACE, tmp / "r")
    for _ in range(2):
        post(listener, json.dumps(otlp_json(TRACE, FOREIGN[:1])).encode())
    lines = Path(tmp / "r" / TRACE_EVENTS).read_text().splitlines()
    assert len(lines) == 4


def test_chunked_bodies_are_read_whole(listening):
    # Node's http client sends OTLP/JSON chunked (no Content-Length)
    listener, store, tmp = listening
    store.register(TRACE, tmp / "r")
    body = json.dumps(otlp_json(TRACE, FOREIGN[:1])).encode()
    answer = httpx.post(f"{listener.url}/v1/traces", content=iter([body[:10], body[10:]]),
                        headers={"Content-Type": "application/json"})
    assert answer.status_code == 200 and store.counts.matched_spans == 1
    too_big = iter([b" " * 40_000, b" " * 40_000])
    answer = httpx.post(f"{listener.url}/v1/traces", content=too_big,
                        headers={"Content-Type": "application/json"})
    assert answer.status_code == 413 and store.counts.oversized_requests == 1


def test_a_jobs_listener_files_by_rollout_and_writes_its_counts(tmp_path, monkeypatch):
    from benchflow.rollout.events import RolloutEvent, RolloutEventKind
    from benchflow.rollout.result import RolloutResult
    from benchflow.traces.join import COUNTS_FILE, JobTraces

    monkeypatch.setattr("benchflow.traces.join.QUIET_SEC", 0.0)
    traces = JobTraces.start(tmp_path / "job", "127.0.0.1:0",
                             [lambda s: s.replace("POST", "***")])
    assert traces is not None
    result = RolloutResult(job_name="job", rollout_name="http/ds/t__1", task_name="t",
                           dataset_name="ds", agent_name="http", attempt=1, trace_id=TRACE)
    traces(RolloutEvent(RolloutEventKind.START, "http/ds/t__1", result))
    post(traces.listener, json.dumps(otlp_json(TRACE, FOREIGN[:1])).encode())
    traces.stop()
    events = read_events(tmp_path / "job" / "http" / "ds" / "t__1" / TRACE_EVENTS)
    assert events[0]["data"]["attributes"] == {"http.method": "***"}
    counts = json.loads((tmp_path / "job" / COUNTS_FILE).read_text())
    assert counts["matched_spans"] == 1 and counts["requests"] == 1


def test_the_default_address_taken_is_a_warning_an_explicit_one_an_error(tmp_path, monkeypatch,
                                                                         caplog):
    from benchflow.traces.join import JobTraces

    with TraceListener(TraceStore(tmp_path), "127.0.0.1", 0) as busy:
        monkeypatch.setattr("benchflow.traces.join.DEFAULT_LISTEN", f"127.0.0.1:{busy.port}")
        assert JobTraces.start(tmp_path / "job", None) is None
        assert "agent traces of this job are not collected" in caplog.text
        with pytest.raises(ConfigError, match="cannot listen"):
            JobTraces.start(tmp_path / "job", f"127.0.0.1:{busy.port}")
    assert JobTraces.start(tmp_path / "job", "none") is None
