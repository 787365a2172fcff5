"""benchflow.tracing: the client's events, nesting, hooks and limits, read back through
the real OpenTelemetry pipeline (SDK -> OTLP protobuf -> benchflow's decoder)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from benchflow.traces.convert import span_events  # noqa: E402
from benchflow.traces.otlp import decode_request  # noqa: E402
from benchflow.traces.reader import span_tree  # noqa: E402
from benchflow.tracing import (  # noqa: E402
    EVENT_TYPES,
    Limits,
    Rollout,
    normalize_trace_id,
    usage_from_openai,
)

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def make(**kwargs):
    memory = InMemorySpanExporter()
    client = Rollout(agent_name="agent", environment="test",
                     span_processors=[SimpleSpanProcessor(memory)],
                     exporter=InMemorySpanExporter(), **kwargs)
    return client, memory


def events_of(memory):
    """Every event, decoded from the spans as OTLP protobuf (what the listener receives)."""
    body = encode_spans(memory.get_finished_spans()).SerializeToString()
    out = []
    for span in decode_request(body, "application/x-protobuf"):
        out.extend(span_events(span)[0])
    return sorted(out, key=lambda e: e["seq"])


def test_the_spec_example_gives_the_taxonomy_with_nesting_and_ids():
    client, memory = make()
    with client.trace("support_agent", trace_id=TRACE, user_id="cus_123",
                      conversation_id="thread_123") as trace:
        trace.message(role="user", content="Where is my order?")
        with trace.span("retrieval", name="search_help_center") as span:
            span.record_input({"query": "order"})
            span.record_output({"document_ids": [1, 2], "hit_count": 2})
        with trace.tool("lookup_order", tool_call_id="call_123",
                        arguments={"order_id": "4421"}) as call:
            call.record_output({"status": "shipped"})
        trace.feedback("thumbs_up", True)
        trace.signal("order_resolved", True)
    client.flush()
    events = events_of(memory)
    assert [e["type"] for e in events] == [
        "trace.start", "message", "span.start", "span.update", "span.end", "tool.call",
        "tool.result", "feedback", "user.signal", "trace.end"]
    assert {e["trace_id"] for e in events} == {TRACE}
    root = events[0]
    assert root["parent_span_id"] is None and root["data"]["user_id"] == "cus_123"
    assert all(e["parent_span_id"] == root["span_id"] for e in events
               if e["type"] in ("span.start", "tool.call"))
    assert events[4]["data"]["output"] == {"document_ids": [1, 2], "hit_count": 2}
    assert events[6]["data"]["tool_call_id"] == "call_123"
    assert events[6]["data"]["output"] == {"status": "shipped"}
    assert all(e["type"] in EVENT_TYPES for e in events)
    spans = {s.name: s for s in memory.get_finished_spans()}
    assert spans["lookup_order"].attributes["gen_ai.tool.call.id"] == "call_123"
    assert spans["support_agent"].attributes["enduser.id"] == "cus_123"
    assert spans["support_agent"].resource.attributes["service.name"] == "agent"


def test_nested_with_blocks_nest_and_stream_chunks_and_usage():
    client, memory = make()
    with client.trace("t", trace_id=TRACE) as trace:
        with trace.span("task", name="outer"):
            with trace.span("planner", name="inner"):
                with trace.llm("chat", model="m", provider="p", stream=True) as llm:
                    for piece in ("Hel", "lo"):
                        llm.record_chunk(piece)
                    llm.set_usage(**usage_from_openai(
                        {"usage": {"prompt_tokens": 5, "completion_tokens": 2}}))
            trace.message(role="assistant", content="inside outer")
    client.flush()
    events = events_of(memory)
    (root,) = span_tree(events)
    (outer,) = root.children
    (inner,) = outer.children
    (llm_node,) = inner.children
    assert llm_node.kind == "llm" and llm_node.type == "llm.stream_start"
    assert [e["data"]["content"] for e in llm_node.events] == ["Hel", "lo"]
    assert llm_node.end["data"]["output"] == "Hello" and llm_node.end["data"]["n_chunks"] == 2
    assert llm_node.usage == {"input_tokens": 5, "output_tokens": 2, "total_tokens": 7}
    # the message went to the innermost open span of the context: outer
    assert [e["type"] for e in outer.events] == ["message"]


def test_async_traces_in_concurrent_tasks_stay_apart():
    client, memory = make()

    async def attempt(n: int) -> None:
        async with client.trace(f"t{n}") as trace:
            async with trace.span("task", name=f"step{n}"):
                await asyncio.sleep(0)
                trace.message(role="user", content=str(n))

    async def main() -> None:
        await asyncio.gather(*(attempt(n) for n in range(5)))

    asyncio.run(main())
    client.flush()
    spans = memory.get_finished_spans()
    by_trace: dict[int, set[str]] = {}
    for span in spans:
        by_trace.setdefault(span.context.trace_id, set()).add(span.name)
    assert sorted(map(sorted, by_trace.values())) == [[f"step{n}", f"t{n}"] for n in range(5)]
    for span in spans:
        if span.name.startswith("step"):
            (event,) = span.events
            assert json.loads(event.attributes["rollout.event"])["data"]["content"] \
                == span.name.removeprefix("step")


def test_an_exception_marks_the_span_failed_and_is_reraised():
    client, memory = make()
    with pytest.raises(RuntimeError), client.trace("t") as trace, trace.tool("flaky"):
        raise RuntimeError("boom")
    client.flush()
    events = events_of(memory)
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["data"]["status"] == "error" and "boom" in result["data"]["error"]
    assert [e["data"]["error_type"] for e in events if e["type"] == "error"] \
        == ["RuntimeError", "RuntimeError"]
    from opentelemetry.trace import StatusCode

    assert {s.name: s.status.status_code for s in memory.get_finished_spans()} == {
        "flaky": StatusCode.ERROR, "t": StatusCode.ERROR}


def test_scrubber_and_before_send_run_before_anything_is_exported():
    def before_send(event):
        if event["type"] == "feedback":
            return None
        if event["type"] == "span.start" and event["name"] == "private":
            return None
        event["data"].pop("internal_note", None)
        return event

    client, memory = make(scrubber=lambda s: s.replace("sk-live-123", "[key]"),
                          before_send=before_send)
    with client.trace("t") as trace:
        trace.message(role="user", content="my key is sk-live-123", internal_note="x")
        trace.feedback("rating", 5)
        with trace.span("task", name="private"), trace.span("task", name="child"):
            pass
    client.flush()
    dumped = repr([(s.attributes, [e.attributes for e in s.events])
                   for s in memory.get_finished_spans()])
    assert "sk-live-123" not in dumped and "[key]" in dumped and "internal_note" not in dumped
    events = events_of(memory)
    assert "feedback" not in [e["type"] for e in events]
    assert {s.name for s in memory.get_finished_spans()} == {"t", "child"}
    root = next(e for e in events if e["type"] == "trace.start")
    child = next(e for e in events if e["name"] == "child" and e["type"] == "span.start")
    assert child["parent_span_id"] == root["span_id"]  # re-attached above the dropped span


def test_a_failing_hook_drops_the_event_instead_of_leaking_it():
    def scrubber(text: str) -> str:
        if "secret" in text:
            raise ValueError("cannot scrub")
        return text

    client, memory = make(scrubber=scrubber)
    with client.trace("t") as trace:
        trace.message(role="user", content="a secret")
        trace.message(role="user", content="fine")
    client.flush()
    assert [e["data"]["content"] for e in events_of(memory) if e["type"] == "message"] == ["fine"]


def test_limits_cut_strings_big_events_and_event_counts_and_say_so():
    client, memory = make(limits=Limits(max_string_chars=10, max_event_bytes=2000,
                                        max_events_per_span=3))
    with client.trace("t") as trace:
        trace.message(role="user", content="x" * 25)
        trace.message(role="user", content=["y" * 9] * 500)
        for n in range(5):
            trace.signal("s", n)
    client.flush()
    events = events_of(memory)
    first, second = (e for e in events if e["type"] == "message")
    assert first["data"]["content"] == "x" * 10 + "…[truncated 15 chars]"
    assert first["data"]["truncated"] is True
    assert second["data"]["truncated"] is True and second["data"]["original_bytes"] > 2000
    assert len(second["data"]["preview"]) <= 1000
    end = events[-1]
    assert end["type"] == "trace.end" and end["data"]["dropped_events"] == 4
    assert len([e for e in events if e["type"] == "user.signal"]) == 1


def test_capture_event_and_identify_user_inside_and_outside_a_trace():
    client, memory = make()
    with pytest.raises(ValueError, match="unknown type 'span.start'"):
        client.capture_event("span.start", {})
    with client.trace("t", trace_id=TRACE) as trace, trace.span("evaluator", name="judge"):
        client.capture_event("eval.result", {"score": 0.5}, name="judge")
        client.capture_event("metric", {"latency_ms": 12})
    client.identify_user("user_1", {"plan": "pro"})
    client.flush()
    events = events_of(memory)
    judge = next(e for e in events if e["type"] == "span.start")
    inside = [e for e in events if e["type"] in ("eval.result", "metric")]
    assert [e["span_id"] for e in inside] == [judge["span_id"]] * 2
    assert inside[0]["data"] == {"score": 0.5, "name": "judge"}
    identity = next(e for e in events if e["type"] == "identity.update")
    assert identity["trace_id"] != TRACE
    assert identity["data"] == {"user_id": "user_1", "traits": {"plan": "pro"}}


def test_trace_ids_from_payloads():
    assert normalize_trace_id(TRACE.upper()) == TRACE
    assert normalize_trace_id("4bf92f35-77b3-4da6-a3ce-929d0e0e4736") == TRACE
    hashed = normalize_trace_id("trace_123")
    assert hashed == normalize_trace_id("trace_123") and len(hashed) == 32
    assert normalize_trace_id(None) != normalize_trace_id(None)
    client, memory = make()
    with client.trace("t", trace_id="trace_123"):
        pass
    client.flush()
    (span,) = memory.get_finished_spans()
    assert format(span.context.trace_id, "032x") == hashed
    assert events_of(memory)[0]["data"]["source_trace_id"] == "trace_123"


def test_usage_from_openai_forms():
    responses = {"usage": {"input_tokens": 10, "output_tokens": 4, "total_tokens": 14,
                           "input_tokens_details": {"cached_tokens": 3},
                           "output_tokens_details": {"reasoning_tokens": 1}}}
    assert usage_from_openai(responses) == {"input_tokens": 10, "output_tokens": 4,
                                            "total_tokens": 14, "cached_tokens": 3,
                                            "reasoning_tokens": 1}

    class Usage:
        prompt_tokens, completion_tokens, total_tokens = 7, 3, None

    class Chat:
        usage = Usage()

    assert usage_from_openai(Chat()) == {"input_tokens": 7, "output_tokens": 3,
                                         "total_tokens": 10}
    assert usage_from_openai({"id": "no usage"}) == {}


class _Collector(BaseHTTPRequestHandler):
    status = 200

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.auth = self.headers.get("Authorization")  # type: ignore[attr-defined]
        self.send_response(self.status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize(("status", "ok", "said"), [(200, True, "accepting spans"),
                                                    (401, False, "credentials rejected")])
def test_check_sends_an_empty_export_with_the_api_key(status, ok, said):
    handler = type("H", (_Collector,), {"status": status})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = Rollout(api_key="k-123", endpoint=f"http://127.0.0.1:{server.server_port}")
        result = client.check()
    finally:
        server.shutdown()
        server.server_close()
    assert result.ok is ok and said in result.message and bool(result) is ok
    assert server.auth == "Bearer k-123"  # type: ignore[attr-defined]
    assert "k-123" not in repr(client)


def test_check_says_when_the_collector_is_down():
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    port = server.server_port
    server.server_close()
    result = Rollout(endpoint=f"http://127.0.0.1:{port}").check(timeout_sec=2)
    assert not result.ok and "not reachable" in result.message


def test_the_endpoint_comes_from_the_standard_variables(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/")
    assert Rollout().endpoint == "http://collector:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:9/custom")
    assert Rollout().endpoint == "http://c:9/custom"
    assert Rollout(endpoint="http://x:1").endpoint == "http://x:1/v1/traces"
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    assert Rollout().endpoint == "http://localhost:4318/v1/traces"


NEVER_FOR_THE_SDK = ("opentelemetry", "docker", "acp", "benchflow.job", "benchflow.rollout",
                     "benchflow.sandbox", "benchflow.agents", "pydantic", "typer", "rich",
                     "httpx", "benchflow.traces")


def test_importing_the_sdk_loads_no_heavy_module():
    code = "import benchflow.tracing, sys; print(' '.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.split()
    heavy = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in NEVER_FOR_THE_SDK)]
    assert heavy == []
    assert "benchflow.tracing._client" in loaded
