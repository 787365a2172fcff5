"""Per-role keys for benchflow's model server and relay: calls attributed by the key they
carry (never by timing), counted per role, the upstream key never handed to an agent, and
script answers that target a role or any user message."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from benchflow.agents.base import StepOutcome
from benchflow.model_server import ModelServer, parse_script
from benchflow.model_server.relay import ModelRelay
from benchflow.model_server.traffic import ModelTraffic, request_keys, with_key
from benchflow.model_server.wire import CallTokens, call_usage, request_model, tool_io
from benchflow.rollout.roles import RoleLedger
from benchflow.trajectory.events import RoleIdentity
from benchflow.trajectory.writer import TrajectoryWriter

ROLES = {"coder": RoleIdentity(agent="claude", model="claude-sonnet-4-6"),
         "reviewer": RoleIdentity(agent="codex", model="gpt-5.4")}
BASH = {"name": "Bash", "input_schema": {"type": "object", "properties": {
    "command": {"type": "string"}}, "required": ["command"]}}


def test_each_role_gets_its_own_key_found_in_any_header_form() -> None:
    traffic = ModelTraffic(ROLES, upstream_key="sk-real")
    coder, reviewer = traffic.token_for("coder"), traffic.token_for("reviewer")
    assert coder != reviewer and coder.startswith("benchflow-") and "sk-real" not in coder
    assert traffic.caller({"Authorization": f"Bearer {reviewer}"}, "/v1/responses").role == "reviewer"
    assert traffic.caller({"x-api-key": coder}, "/v1/messages").role == "coder"
    assert traffic.caller({"x-goog-api-key": coder}, "/v1beta/models/m:generateContent").role \
        == "coder"
    assert traffic.caller({}, f"/v1beta/models/m:generateContent?key={reviewer}").role \
        == "reviewer"
    host = traffic.caller({"Authorization": "Bearer sk-real"}, "/v1/chat/completions")
    assert (host.role, host.upstream) == (None, True)
    stranger = traffic.caller({"x-api-key": "sk-guess"}, "/v1/messages")
    assert (stranger.role, stranger.upstream) == (None, False)
    assert traffic.tokens == {coder, reviewer}


def test_with_key_swaps_the_key_wherever_it_was_sent() -> None:
    headers, path = with_key({"Authorization": "Bearer tok", "Accept": "x"},
                             "/v1beta/models/m:generateContent?key=tok&alt=sse", "tok", "sk-real")
    assert headers == {"Authorization": "Bearer sk-real", "Accept": "x"}
    assert "key=sk-real" in path and "alt=sse" in path and "tok" not in path
    assert request_keys(headers, path) == ["sk-real", "sk-real"]


def test_counts_per_role_and_turn_and_the_main_model() -> None:
    traffic = ModelTraffic(ROLES)
    traffic.count("coder", CallTokens(100, 5), model="claude-sonnet-4-6", main=True)
    traffic.count("coder", CallTokens(10, 1), model="claude-haiku-4-5", main=False)  # a title
    traffic.count(None, CallTokens(999, 9))  # a judge: no role
    assert traffic.take_tokens("coder") == CallTokens(110, 6)
    assert traffic.take_tokens("coder") is None  # taken per turn
    traffic.count("coder", CallTokens(1, 1), model="claude-sonnet-4-6", main=True)
    assert traffic.totals() == {"coder": CallTokens(111, 7)}
    assert traffic.main_model("coder") == "claude-sonnet-4-6"
    assert traffic.main_model("reviewer") is None


@pytest.mark.parametrize(("path", "response", "expected"), [
    ("/v1/chat/completions", {"usage": {"prompt_tokens": 10, "completion_tokens": 2,
                                        "prompt_tokens_details": {"cached_tokens": 4}}},
     CallTokens(10, 2, 4)),
    ("/v1/responses", {"usage": {"input_tokens": 7, "output_tokens": 3,
                                 "input_tokens_details": {"cached_tokens": 1}}},
     CallTokens(7, 3, 1)),
    ("/v1/messages", {"usage": {"input_tokens": 5, "output_tokens": 2,
                                "cache_read_input_tokens": 20,
                                "cache_creation_input_tokens": 1}}, CallTokens(26, 2, 20)),
    ("/v1beta/models/gemini-2.5-pro:streamGenerateContent",
     {"usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4,
                        "thoughtsTokenCount": 2, "cachedContentTokenCount": 3}},
     CallTokens(9, 6, 3)),
    ("/v1/messages", {"content": []}, None),
])
def test_call_usage_in_each_api(path: str, response: dict[str, Any],
                                expected: CallTokens | None) -> None:
    assert call_usage(path, response) == expected


def test_tool_io_in_each_api() -> None:
    anthropic = {"messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash",
                                           "input": {"command": "ls"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": [{"type": "text", "text": "a.txt"}]}]}]}
    chat = {"messages": [
        {"role": "assistant", "tool_calls": [{"id": "c1", "function": {
            "name": "bash", "arguments": "{\"command\": \"ls\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}]}
    responses = {"input": [
        {"type": "function_call", "call_id": "c2", "name": "exec_command",
         "arguments": "{\"cmd\": \"ls\"}"},
        {"type": "function_call_output", "call_id": "c2", "output": "a.txt"}]}
    gemini = {"contents": [
        {"role": "model", "parts": [{"functionCall": {"id": "g1", "name": "run_shell_command",
                                                      "args": {"command": "ls"}}}]},
        {"role": "user", "parts": [{"functionResponse": {
            "id": "g1", "name": "run_shell_command", "response": {"output": "a.txt"}}}]}]}
    cases = [("/v1/messages", anthropic), ("/v1/chat/completions", chat),
             ("/v1/responses", responses), ("/v1beta/models/m:generateContent", gemini)]
    for path, body in cases:
        [io] = tool_io(path, body)
        assert io.output == "a.txt" and io.arguments is not None, (path, io)
        assert "ls" in json.dumps(io.arguments)
    assert request_model("/v1beta/models/gemini-2.5-pro:generateContent?alt=sse", {}) \
        == "gemini-2.5-pro"


# -- the relay: the sandbox holds role keys only --------------------------------------------

class _Upstream(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Upstream.seen.append({"auth": self.headers.get("Authorization"), "path": self.path,
                               "body": json.loads(body)})
        reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}}],
                            "usage": {"prompt_tokens": 30, "completion_tokens": 4}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


@contextlib.contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served on a loopback port for the block; yields its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def upstream() -> Iterator[str]:
    _Upstream.seen = []
    with _serving(_Upstream) as url:
        yield url


def test_relay_swaps_role_keys_for_the_upstream_key_and_refuses_others(upstream, tmp_path):
    traffic = ModelTraffic(ROLES, upstream_key="sk-real-upstream")
    body = {"model": "qwen", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "bash"}}]}
    with ModelRelay(upstream, host="127.0.0.1", log_dir=tmp_path, traffic=traffic) as relay:
        ok = httpx.post(f"{relay.url}/v1/chat/completions", json=body,
                        headers={"Authorization": f"Bearer {traffic.token_for('reviewer')}"})
        refused = httpx.post(f"{relay.url}/v1/chat/completions", json=body,
                             headers={"Authorization": "Bearer sk-guessed"})
        host = httpx.post(f"{relay.url}/v1/chat/completions", json=body,
                          headers={"Authorization": "Bearer sk-real-upstream"})
    assert ok.status_code == 200 and host.status_code == 200
    assert refused.status_code == 401 and "role keys" in refused.json()["error"]["message"]
    assert [s["auth"] for s in _Upstream.seen] == ["Bearer sk-real-upstream"] * 2
    assert traffic.totals() == {"reviewer": CallTokens(30, 4)}  # the host's call: no role
    assert traffic.main_model("reviewer") == "qwen"
    log = (tmp_path / "requests.jsonl").read_text()
    assert [json.loads(line)["summary"].get("role") for line in log.splitlines()] == [
        "reviewer", None, None]
    assert "sk-real-upstream" not in log and traffic.token_for("reviewer") not in log


# -- the scripted server: answers by role and by any user message ---------------------------

SCRIPT = {"name": "roles", "answers": [
    {"role": "coder", "match": "Address the review", "steps": [
        {"shell": "cat review.md"}, {"text": "Addressed."}]},
    {"role": "coder", "steps": [{"shell": "echo 12 > sum.txt"}, {"text": "Summed."}]},
    {"role": "reviewer", "steps": [{"shell": "cat sum.txt"}, {"text": "Approved."}]},
]}


def _ask(url: str, key: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    reply = httpx.post(f"{url}/v1/messages", headers={"x-api-key": key}, json={
        "model": "claude-sonnet-4-6", "max_tokens": 100, "messages": messages, "tools": [BASH]})
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_script_answers_target_roles_and_a_later_user_message() -> None:
    traffic = ModelTraffic(ROLES)
    coder, reviewer = traffic.token_for("coder"), traffic.token_for("reviewer")
    with ModelServer(parse_script(SCRIPT), traffic=traffic) as server:
        first = _ask(server.url, coder, [{"role": "user", "content": "Write the sum."}])
        review = _ask(server.url, reviewer, [
            {"role": "user", "content": "<environment_context>cwd /app</environment_context>"},
            {"role": "user", "content": "Review the work."}])
        # the coder's second prompt in the same session: its own answer, from its step 0
        again = _ask(server.url, coder, [
            {"role": "user", "content": "Write the sum."},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                                               "input": {"command": "echo 12 > sum.txt"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                          "content": ""}]},
            {"role": "assistant", "content": "Summed."},
            {"role": "user", "content": "Address the review in review.md."}])
        stranger = _ask(server.url, "benchflow-scripted", [{"role": "user", "content": "x"}])
    commands = [next(b["input"]["command"] for b in r["content"] if b["type"] == "tool_use")
                for r in (first, review, again)]
    assert commands == ["echo 12 > sum.txt", "cat sum.txt", "cat review.md"]
    assert stranger["content"][0]["text"] == "Done."  # no role: no role's answer applies
    assert [r.get("role") for r in server.requests] == ["coder", "reviewer", "coder", None]
    assert set(traffic.totals()) == {"coder", "reviewer"}


def test_an_answer_needs_a_match_or_a_role() -> None:
    from benchflow.errors import ConfigError

    with pytest.raises(ConfigError, match="`match`, `regex` or `role`"):
        parse_script({"answers": [{"text": "x"}]})
    with pytest.raises(ConfigError, match="not both"):
        parse_script({"answers": [{"match": "a", "regex": "b", "text": "x"}]})


# -- a turn's calls are counted before the agent can read the last answer -------------------
# Replays the golden gemini coder's last call of its second turn (the request holding the
# result of `echo done | tee /app/done.txt`, which gemini's ACP updates never carry). The
# handler thread is held right after the answer's last byte is sent, until the turn has been
# taken: the agent answers its prompt as soon as it has read the answer, and benchflow takes
# the turn's tokens and tool results then (`RoleLedger.record`). A call noted after the send
# lost its tool result and moved its tokens to the role's next turn (seen live under load:
# `test_faithful_records.py` exported the command without its output).

GOLDEN_GEMINI = (Path(__file__).parents[2] / "golden" / "job" / "gemini+opencode" / "tasks"
                 / "offline-coder-reviewer__1")
GEMINI_ROLES = {"coder": RoleIdentity(agent="gemini", model="gemini-2.5-pro")}


def _golden_last_coder_call() -> tuple[dict[str, Any], list[str]]:
    """The coder's last model call (turn 2) and the ACP ids of that turn's tool calls."""
    calls = [json.loads(line) for line in
             (GOLDEN_GEMINI / "model_calls.jsonl").read_text().splitlines()]
    last = [c for c in calls if c["role"] == "coder" and c["turn"] == 2][-1]
    events = [json.loads(line) for line in
              (GOLDEN_GEMINI / "trajectory" / "acp_trajectory.jsonl").read_text().splitlines()]
    ids = list(dict.fromkeys(e["tool_call_id"] for e in events if e.get("type") == "tool_call"
                             and e.get("role") == "coder" and e.get("turn") == 2))
    return last, ids


@pytest.fixture
def hold_after(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`hold_after(cls, name)`: the handler thread waits after `cls.name` returns until the
    test ends (set on teardown, so a failing test leaves no thread waiting)."""
    release = threading.Event()

    def hold(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def held(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return original(self, *args, **kwargs)
            finally:
                release.wait()

        monkeypatch.setattr(cls, name, held)

    yield hold
    release.set()


def _take_turn(traffic: ModelTraffic, ids: list[str], path: Path) -> list[dict[str, Any]]:
    """The ledger's work when the coder's turn-2 prompt is answered; the events it wrote."""
    ledger = RoleLedger(GEMINI_ROLES, traffic)
    with TrajectoryWriter(path) as writer:
        ledger.record("coder", StepOutcome(n_tool_calls=len(ids), incomplete_tool_calls=ids),
                      writer, scene="review", turn=2, session_turn=0)
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def _assert_turn_complete(events: list[dict[str, Any]], ids: list[str]) -> None:
    results = {e["tool_call_id"]: e for e in events if e["type"] == "tool_result"}
    assert list(results) == ids, events
    done = results[ids[-1]]
    assert done["arguments"] == {"command": "echo done | tee /app/done.txt"}
    assert "Output: done" in done["output"]
    [usage] = [e for e in events if e["type"] == "usage"]
    assert usage["source"] == "model_calls" and usage["usage"]["input_tokens"] > 0


def test_the_server_notes_a_call_before_the_agent_can_read_its_answer(hold_after, tmp_path):
    from benchflow.model_server.server import _Handler

    call, ids = _golden_last_coder_call()
    script = parse_script(yaml.safe_load(
        (Path(__file__).parents[2] / "conformance" / "coder-reviewer.yaml").read_text()))
    traffic = ModelTraffic(GEMINI_ROLES)
    hold_after(_Handler, "_write")  # the answer is sent; the thread is descheduled
    with ModelServer(script, traffic=traffic) as server:
        reply = httpx.post(f"{server.url}{call['path']}", json=call["request"],
                           headers={"x-goog-api-key": traffic.token_for("coder")})
        assert reply.status_code == 200 and "The review is addressed." in reply.text
        events = _take_turn(traffic, ids, tmp_path / "acp_trajectory.jsonl")
    _assert_turn_complete(events, ids)


def test_the_relay_notes_a_call_before_the_agent_can_read_its_answer(hold_after, tmp_path):
    from benchflow.model_server.relay import _Handler

    call, ids = _golden_last_coder_call()
    answer = json.dumps(call["response"]).encode()

    class Gemini(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

    traffic = ModelTraffic(GEMINI_ROLES, upstream_key="sk-real")
    hold_after(_Handler, "_forward")  # the answer is relayed to its end
    with _serving(Gemini) as upstream, ModelRelay(upstream, traffic=traffic) as relay:
        reply = httpx.post(f"{relay.url}/v1beta/models/gemini-2.5-pro:generateContent",
                           json=call["request"],
                           headers={"x-goog-api-key": traffic.token_for("coder")})
        assert reply.status_code == 200 and reply.json() == call["response"]
        events = _take_turn(traffic, ids, tmp_path / "acp_trajectory.jsonl")
    _assert_turn_complete(events, ids)


def test_the_relay_sends_a_stream_s_last_chunk_after_noting_the_call(monkeypatch):
    # a streaming client may end its turn at the last event, before the body's end: the
    # call is noted before the chunk holding that event is sent on
    from benchflow.model_server.relay import _Handler

    order: list[str] = []
    send, observe = _Handler._send_chunk, _Handler._observe
    monkeypatch.setattr(_Handler, "_send_chunk", lambda self, chunk: (
        order.append(chunk.decode()), send(self, chunk))[1])
    monkeypatch.setattr(_Handler, "_observe", lambda self, *a: (
        order.append("observe"), observe(self, *a))[1])

    class Stream(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in (b"data: {}\n\n", b"data: [DONE]\n\n"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    traffic = ModelTraffic(ROLES, upstream_key="sk-real")
    with _serving(Stream) as upstream, ModelRelay(upstream, traffic=traffic) as relay:
        reply = httpx.post(f"{relay.url}/v1/chat/completions", json={"stream": True},
                           headers={"authorization": f"Bearer {traffic.token_for('coder')}"})
    assert reply.text.endswith("data: [DONE]\n\n")
    done = next(i for i, sent in enumerate(order) if "[DONE]" in sent)
    assert "observe" in order[:done], order
