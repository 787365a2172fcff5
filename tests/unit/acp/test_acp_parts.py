"""The ACP client's parts in isolation: transport framing, recorder, launcher, policy, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError
from acp.schema import InitializeResponse, NewSessionResponse
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from benchflow.acp import PermissionPolicy, PermissionRequest, launch_command, map_acp_errors
from benchflow.acp.errors import FOREIGN_ERRORS
from benchflow.acp.handshake import choose_auth, match_model, model_option, option_values
from benchflow.acp.launch import LAUNCHER
from benchflow.acp import recorder as recorder_module
from benchflow.acp.recorder import UpdateRecorder
from benchflow.acp.transport import ProcessTransport, StdoutNoise
from benchflow.errors import AgentProtocolError, ConfigError
from benchflow.trajectory import TrajectoryWriter, iter_events


class _Chunks:
    """A ByteReceiveStream that yields the given chunks, then EOF."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = list(chunks)

    async def receive(self, max_bytes: int = 65536) -> bytes:
        if not self._chunks:
            raise anyio.EndOfStream
        return self._chunks.pop(0)


class _Sink:
    def __init__(self) -> None:
        self.data = bytearray()

    async def send(self, item: bytes) -> None:
        self.data.extend(item)

    async def aclose(self) -> None:
        pass


class _FakeProcess:
    def __init__(self, chunks: list[bytes]) -> None:
        self.stdout = _Chunks(chunks)
        self.stdin = _Sink()


async def _drain(transport: ProcessTransport) -> list[dict[str, Any]]:
    out = []
    while (message := await transport.receive()) is not None:
        out.append(message)
    return out


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points + [len(data)]:
        if p > last:
            pieces.append(data[last:p])
            last = p
    return pieces


INTS = st.integers(min_value=-(2**63), max_value=2**64 - 1)
"""What orjson decodes exactly (a JSON-RPC id is one); below -2**63 it gives a float."""
MESSAGES = st.lists(
    st.dictionaries(
        st.sampled_from(["id", "method", "params", "x"]),
        st.one_of(INTS, st.text(max_size=50), st.lists(INTS, max_size=3)),
        min_size=1,
    ),
    max_size=8,
)


@given(
    messages=MESSAGES,
    garbage=st.lists(
        st.text(max_size=20).filter(lambda s: "\n" not in s and "{" not in s and s.strip() != ""),
        max_size=3,
    ),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
)
@settings(max_examples=60, deadline=None)
def test_transport_frames_messages_however_the_bytes_are_cut(
    messages: list[dict[str, Any]], garbage: list[str], cuts: list[int]
) -> None:
    lines = [json.dumps(m).encode() for m in messages] + [g.encode() for g in garbage]
    data = b"\n".join(lines) + b"\n"
    transport = ProcessTransport(_FakeProcess(_split(data, cuts)), noise=StdoutNoise())  # type: ignore[arg-type]
    received = anyio.run(_drain, transport, backend="asyncio")
    assert received == messages
    assert transport.noise.count == len(garbage)


@pytest.mark.anyio
async def test_transport_long_line_last_line_without_newline_and_hook_order() -> None:
    big = {"jsonrpc": "2.0", "method": "session/update", "params": {"text": "z" * 3_000_000}}
    data = (
        json.dumps(big).encode()
        + b"\n\nplain text\n"
        + json.dumps({"id": 1, "result": None}).encode()
    )
    seen: list[Any] = []
    transport = ProcessTransport(
        _FakeProcess(_split(data, list(range(0, len(data), 65536)))),  # type: ignore[arg-type]
        on_receive=lambda m: seen.append(m.get("id", "update")),
    )
    received = await _drain(transport)
    # the hook recorded the 3 MB update; it is not handed on to the SDK (a no-op there)
    assert received == [{"id": 1, "result": None}]
    assert seen == ["update", 1]
    assert list(transport.noise.recent) == ["plain text"]
    without_hook = ProcessTransport(
        _FakeProcess(_split(data, list(range(0, len(data), 65536)))),  # type: ignore[arg-type]
    )
    assert await _drain(without_hook) == [big, {"id": 1, "result": None}]


@pytest.mark.anyio
async def test_transport_drops_lines_over_the_limit_and_recovers() -> None:
    data = b"{" + b"a" * 5000 + b"\n" + b'{"id": 2}\n'
    transport = ProcessTransport(
        _FakeProcess([data[i : i + 100] for i in range(0, len(data), 100)]),  # type: ignore[arg-type]
        max_line_bytes=1000,
    )
    assert await _drain(transport) == [{"id": 2}]
    assert transport.noise.count == 1 and "dropped" in transport.noise.recent[0]


@pytest.mark.anyio
async def test_transport_send_writes_one_json_line() -> None:
    process = _FakeProcess([])
    transport = ProcessTransport(process)  # type: ignore[arg-type]
    await transport.send({"jsonrpc": "2.0", "id": 0, "method": "initialize"})
    assert process.stdin.data == b'{"jsonrpc":"2.0","id":0,"method":"initialize"}\n'


def _watched(recorder: UpdateRecorder, writer: TrajectoryWriter, reads: list[bytes],
             seen: list[list[str]]) -> ProcessTransport:
    """A transport reading `reads` into `recorder`; before each read, the texts `writer`'s
    file holds go to `seen`."""
    class _Watching(_Chunks):
        async def receive(self, max_bytes: int = 65536) -> bytes:
            seen.append([e.text for e in iter_events(writer.path)])  # type: ignore[union-attr]
            return await super().receive(max_bytes)

    process = _FakeProcess([])
    process.stdout = _Watching(reads)
    return ProcessTransport(process, on_receive=recorder.on_receive,  # type: ignore[arg-type]
                            on_drained=recorder.flush)


def _update(session_id: str, text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": session_id,
            "update": {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": text},
            },
        },
    }


@pytest.mark.anyio
async def test_a_burst_of_updates_is_on_disk_before_the_transport_waits_for_more(
    tmp_path: Path,
) -> None:
    writer = TrajectoryWriter(tmp_path / "t.jsonl")
    recorder = UpdateRecorder(writer, scene="main", role="coder")
    recorder.add_session("s1")
    burst = b"".join(json.dumps(_update("s1", f"u{i}")).encode() + b"\n" for i in range(30))
    seen_at_read: list[list[str]] = []
    # the second read: a partial line
    transport = _watched(recorder, writer, [burst, burst[:10]], seen_at_read)
    assert await _drain(transport) == []  # updates are recorded, not handed to the SDK
    texts = [f"u{i}" for i in range(30)]
    # before each read, everything read before it is in the file (flushed once per burst)
    assert seen_at_read == [[], texts, texts]
    assert writer.n_events == 30
    writer.close()


@pytest.mark.anyio
async def test_bursts_within_the_flush_interval_wait_for_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A burst read less than `FLUSH_INTERVAL_SEC` after the last write stays in memory
    until the interval ends (a timer), the next event benchflow records, or the close,
    unless `FLUSH_BYTES` wait."""
    def bursts(prefix: str) -> bytes:
        return b"".join(json.dumps(_update("s1", f"{prefix}{i}")).encode() + b"\n"
                        for i in range(5))

    async def run(interval: float) -> tuple[TrajectoryWriter, UpdateRecorder, list[list[str]]]:
        monkeypatch.setattr(recorder_module, "FLUSH_INTERVAL_SEC", interval)
        writer = TrajectoryWriter(tmp_path / f"t{interval}-{len(list(tmp_path.iterdir()))}.jsonl")
        recorder = UpdateRecorder(writer, scene="main", role="coder")
        recorder.add_session("s1")
        seen: list[list[str]] = []
        assert await _drain(_watched(recorder, writer, [bursts("a"), bursts("b")], seen)) == []
        return writer, recorder, seen

    first = [f"a{i}" for i in range(5)]
    both = first + [f"b{i}" for i in range(5)]
    # a short interval: the held burst is written by the loop's flush tick (waited for)
    ticked = anyio.Event()
    tick = recorder_module._FlushTicks._tick

    def tick_and_tell(self: Any) -> None:
        tick(self)
        ticked.set()

    monkeypatch.setattr(recorder_module._FlushTicks, "_tick", tick_and_tell)
    writer, recorder, seen = await run(0.05)
    assert seen == [[], first, first]  # the first burst at once, the second held
    await ticked.wait()
    assert [e.text for e in iter_events(writer.path)] == both  # type: ignore[union-attr]
    writer.close()
    # an interval that cannot end during the test: the second burst waits for the close
    writer, recorder, seen = await run(3600.0)
    assert seen == [[], first, first]
    assert [e.text for e in iter_events(writer.path)] == first  # type: ignore[union-attr]
    recorder.flush_pending()  # the session's close
    assert [e.text for e in iter_events(writer.path)] == both  # type: ignore[union-attr]
    writer.close()
    # past FLUSH_BYTES waiting, a burst is written at once, interval or not
    monkeypatch.setattr(recorder_module, "FLUSH_BYTES", 100)
    writer, recorder, seen = await run(3600.0)
    assert seen == [[], first, both]
    writer.close()


@pytest.mark.anyio
async def test_recorder_buffers_updates_for_unknown_sessions(tmp_path: Path) -> None:
    writer = TrajectoryWriter(tmp_path / "t.jsonl")
    recorder = UpdateRecorder(writer, scene="main", role="coder")
    recorder.begin_turn(0, None)
    recorder.on_receive(_update("s1", "early"))  # before session/new's answer
    recorder.on_receive(_update("other", "stray"))  # a session that never becomes known
    recorder.on_receive({"jsonrpc": "2.0", "id": 3, "result": {"sessionId": "s1"}})
    recorder.on_receive(_update("s1", "late"))
    recorder.flush()  # what the transport does once it has handled what it read
    assert [e.text for e in iter_events(writer.path)] == ["early", "late"]  # type: ignore[union-attr]
    recorder.flush_pending()
    writer.close()
    events = list(iter_events(writer.path))
    assert [(e.seq, e.text, e.session_id) for e in events] == [  # type: ignore[union-attr]
        (0, "early", "s1"),
        (2, "late", "s1"),
        (1, "stray", "other"),
    ]
    assert recorder.turn_text() == "earlystraylate"


@pytest.mark.anyio
async def test_an_update_whose_session_id_is_not_a_string_is_kept_as_its_text(tmp_path: Path
                                                                        ) -> None:
    writer = TrajectoryWriter(tmp_path / "t.jsonl")
    recorder = UpdateRecorder(writer, scene="main", role="coder")
    recorder.on_receive(_update(7, "numbered"))  # type: ignore[arg-type]
    recorder.flush_pending()  # the session's close: written, not raised
    writer.close()
    assert [(e.text, e.session_id) for e in iter_events(writer.path)] == [  # type: ignore[union-attr]
        ("numbered", "7")]


@pytest.mark.anyio
async def test_recorded_lines_follow_the_turn_span_and_context_as_they_change(
    tmp_path: Path,
) -> None:
    """The common fields of a turn's updates are gathered once, not per update: a new
    turn, step span or context (skills) still shows on the very next update."""
    writer = TrajectoryWriter(tmp_path / "t.jsonl")
    writer.trace_id, writer.span_id = "a" * 32, "b" * 16
    recorder = UpdateRecorder(writer, scene="main", role="coder")
    recorder.add_session("s1")
    recorder.begin_turn(0, None, 0)
    recorder.on_receive(_update("s1", "one"))
    recorder.on_receive(_update("s1", "two"))
    writer.context["skills"] = ["lint"]
    recorder.on_receive(_update("s1", "three"))
    writer.span_id = "c" * 16
    recorder.on_receive(_update("s1", "four"))
    recorder.begin_turn(1, 2, 1)
    writer.context["skills"] = None
    recorder.on_receive(_update("s1", "five"))
    recorder.flush()
    writer.close()
    events = list(iter_events(writer.path))
    assert [(e.text, e.turn, e.round, e.span_id, e.skills) for e in events] == [  # type: ignore[union-attr]
        ("one", 0, None, "b" * 16, None),
        ("two", 0, None, "b" * 16, None),
        ("three", 0, None, "b" * 16, ["lint"]),
        ("four", 0, None, "c" * 16, ["lint"]),
        ("five", 1, 2, "c" * 16, None),
    ]
    assert [e.seq for e in events] == [0, 1, 2, 3, 4]


@pytest.mark.anyio
async def test_recorder_tracks_running_tool_calls() -> None:
    recorder = UpdateRecorder(None, scene=None, role=None)
    start = {
        "method": "session/update",
        "params": {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "tool_call",
                "toolCallId": "t1",
                "title": "x",
                "status": "in_progress",
            },
        },
    }
    end = {
        "method": "session/update",
        "params": {
            "sessionId": "s",
            "update": {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "t1",
                "status": "completed",
            },
        },
    }
    recorder.on_receive(start)
    assert recorder.busy and recorder.n_tool_calls == 1
    recorder.on_receive(end)
    assert not recorder.busy
    with recorder.client_busy():
        assert recorder.busy


@given(
    st.dictionaries(
        st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True),
        st.text(alphabet=st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",))),
        max_size=4,
    )
)
@settings(max_examples=25, deadline=None)
def test_env_file_survives_any_name_and_value(env: dict[str, str]) -> None:
    env = {k: v for k, v in env.items() if k not in ("PATH", "PWD", "SHLVL", "_", "OLDPWD")}
    with tempfile.TemporaryDirectory() as tmp:
        env_file = os.path.join(tmp, "env")
        argv, content = launch_command([sys.executable, "-c", _DUMP_ENV], env, env_file)
        with open(env_file, "wb") as fh:
            fh.write(content)
        result = subprocess.run(
            argv, capture_output=True, check=True, env={"PATH": os.environ["PATH"]}
        )
        assert not os.path.exists(env_file)  # deleted by the launcher before the agent starts
    seen = json.loads(result.stdout)
    for name, value in env.items():
        assert seen[name] == value
    assert argv[:5] == ["sh", "-c", LAUNCHER, "sh", env_file]


_DUMP_ENV = "import json, os, sys; json.dump(dict(os.environ), sys.stdout)"


def test_launch_rejects_bad_names_and_empty_argv() -> None:
    with pytest.raises(ConfigError):
        launch_command(["x"], {"BAD-NAME": "1"}, "/tmp/f")
    with pytest.raises(ConfigError):
        launch_command([], {}, "/tmp/f")


@pytest.mark.anyio
async def test_policies_choose_by_preference() -> None:
    options = [
        {"optionId": "a1", "kind": "allow_once"},
        {"optionId": "a2", "kind": "allow_always"},
        {"optionId": "r2", "kind": "reject_always"},
    ]
    request = PermissionRequest(session_id="s", tool_call={"title": "t"}, options=options)
    assert (await PermissionPolicy.auto_approve().decide(request)).option_id == "a2"
    assert (await PermissionPolicy.deny().decide(request)).option_id == "r2"
    assert (await PermissionPolicy.callback(lambda r: "a1").decide(request)).option_id == "a1"
    assert (
        await PermissionPolicy.callback(lambda r: "nonsense").decide(request)
    ).outcome == "cancelled"
    only_allow = PermissionRequest(session_id="s", tool_call={}, options=options[:1])
    assert (await PermissionPolicy.deny().decide(only_allow)).outcome == "cancelled"


class _M(BaseModel):
    x: int


def _instance(cls: type[BaseException]) -> BaseException:
    if cls is RequestError:
        return RequestError.internal_error({"details": "boom"})
    if cls is ValidationError:
        try:
            _M.model_validate({"x": "no"})
        except ValidationError as exc:
            return exc
    return cls("gone")


@pytest.mark.parametrize("cls", FOREIGN_ERRORS, ids=lambda c: c.__name__)
def test_every_foreign_error_is_mapped(cls: type[BaseException]) -> None:
    original = _instance(cls)
    with pytest.raises(AgentProtocolError) as info, map_acp_errors("session/prompt"):
        raise original
    assert info.value.__cause__ is original
    assert str(info.value).startswith("session/prompt:")


def _init(methods: list[dict[str, Any]]) -> InitializeResponse:
    return InitializeResponse.model_validate({"protocolVersion": 1, "authMethods": methods})


def test_choose_auth() -> None:
    init = _init(
        [
            {"id": "login", "name": "Log in"},
            {
                "type": "env_var",
                "id": "openai",
                "name": "OpenAI",
                "vars": [{"name": "OPENAI_API_KEY"}],
            },
            {
                "type": "env_var",
                "id": "azure",
                "name": "Azure",
                "vars": [{"name": "AZURE_KEY"}, {"name": "AZURE_BASE", "optional": True}],
            },
        ]
    )
    assert choose_auth(init, {}, None) is None
    assert choose_auth(init, {"OPENAI_API_KEY": "k"}, None) == "openai"
    assert choose_auth(init, {"AZURE_KEY": "k"}, None) == "azure"
    assert choose_auth(init, {"AZURE_BASE": "u"}, None) is None  # a required variable is missing
    assert choose_auth(init, {}, "login") == "login"
    with pytest.raises(ConfigError):
        choose_auth(init, {}, "nope")


def test_model_option_and_matching() -> None:
    resp = NewSessionResponse.model_validate(
        {
            "sessionId": "s",
            "configOptions": [
                {
                    "type": "select",
                    "id": "effort",
                    "name": "Effort",
                    "currentValue": "low",
                    "options": [{"value": "low", "name": "low"}],
                },
                {
                    "type": "select",
                    "id": "llm",
                    "name": "Model",
                    "category": "model",
                    "currentValue": "a",
                    "options": [
                        {
                            "group": "g",
                            "name": "G",
                            "options": [{"value": "vendor/gpt-x", "name": "x"}],
                        }
                    ],
                },
            ],
        }
    )
    option = model_option(resp.config_options or [])
    assert option is not None and option.id == "llm"
    values = option_values(option)
    assert values == ["vendor/gpt-x"]
    assert match_model("openai/gpt-x", values) == "vendor/gpt-x"
    assert match_model("other", values) == "other"
