"""The trajectory file: schema, streaming writer, reader, and ACP update conversion."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from acp import helpers
from acp.schema import (
    AvailableCommand,
    AvailableCommandsUpdate,
    Cost,
    CurrentModeUpdate,
    ToolCallLocation,
    UsageUpdate,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from benchflow.errors import ConfigError
from benchflow.trajectory import (
    AgentMessageEvent,
    TrajectoryHeader,
    TrajectoryWriter,
    event_from_update,
    iter_events,
    load,
    read_header,
)
from benchflow.trajectory.events import Usage, event_adapter

TS = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)


def _msg(text: str) -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


def _write(writer: TrajectoryWriter, update: dict[str, Any], **ctx: Any) -> None:
    ctx = {"scene": "main", "role": "coder", "turn": 0, **ctx}
    writer.write(event_from_update(update, seq=writer.next_seq(), ts=TS, **ctx))


def test_header_then_events_flushed_as_written(tmp_path: Path) -> None:
    path = tmp_path / "trajectory" / "acp_trajectory.jsonl"
    header = TrajectoryHeader(
        job_name="j", rollout_name="r", task_name="t", agents=["claude"], models=["m"]
    )
    with TrajectoryWriter(path, header) as writer:
        _write(writer, _msg("hi"))
        lines = path.read_text().splitlines()  # visible before close: flushed per event
        assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["schema_version"] == 3 and first["type"] == "header" and first["job_name"] == "j"
    event = json.loads(lines[1])
    assert {k: event[k] for k in ("seq", "type", "scene", "role", "turn", "text")} == {
        "seq": 0,
        "type": "agent_message",
        "scene": "main",
        "role": "coder",
        "turn": 0,
        "text": "hi",
    }
    assert event["ts"] == "2025-01-02T03:04:05Z"
    assert event["update"] == _msg("hi")
    assert read_header(path).agents == ["claude"]


def test_reopening_appends_and_continues_numbering(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        _write(writer, _msg("a"))
        writer.record("error", error_type="agent_execution_failed", message="boom")
    with TrajectoryWriter(path) as writer:
        _write(writer, _msg("b"))
    assert [e.seq for e in iter_events(path)] == [0, 1, 2]
    assert path.read_text().count('"type":"header"') == 1


def test_load_merges_consecutive_chunks_only(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        _write(writer, _msg("a"))
        _write(writer, _msg("b"))
        _write(
            writer,
            {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "t"}},
        )
        _write(writer, _msg("c"))
        _write(
            writer,
            helpers.start_tool_call("t1", "ls").model_dump(
                mode="json", by_alias=True, exclude_none=True
            ),
        )
        _write(writer, _msg("d"))
        _write(writer, _msg("e"), turn=1)
    events = load(path)
    assert [(e.type, getattr(e, "text", None), getattr(e, "chunks", None)) for e in events] == [
        ("agent_message", "ab", 2),
        ("agent_thought", "t", 1),
        ("agent_message", "c", 1),
        ("tool_call", None, None),
        ("agent_message", "d", 1),
        ("agent_message", "e", 1),
    ]
    assert events[0].seq == 0 and events[0].update["content"]["text"] == "ab"


def test_torn_last_line_is_skipped_bad_middle_line_raises(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TrajectoryWriter(path) as writer:
        _write(writer, _msg("kept"))
    with path.open("ab") as fh:
        fh.write(b'{"seq": 1, "ts": "2025-01-0')  # killed mid-write
    assert [e.text for e in load(path)] == ["kept"]  # type: ignore[union-attr]
    with path.open("ab") as fh:
        fh.write(b"\n")
    with pytest.raises(ConfigError, match=":3:"):
        load(path)


def test_schema_forbids_unknown_fields_and_versions() -> None:
    with pytest.raises(ValidationError):
        event_adapter().validate_python(
            {"type": "agent_message", "seq": 0, "ts": TS, "update": {}, "bogus": 1}
        )
    with pytest.raises(ValidationError):
        TrajectoryHeader.model_validate({"schema_version": 4, "type": "header"})
    with pytest.raises(ValidationError):
        event_adapter().validate_python({"type": "nope", "seq": 0, "ts": TS})


def test_usage_adds_known_fields() -> None:
    total = Usage(input_tokens=1, cost=0.5) + Usage(input_tokens=2, output_tokens=3)
    assert (total.input_tokens, total.output_tokens, total.cost) == (3, 3, 0.5)


# --------------------------------------------------------------------------- ACP update -> event

_text = st.text(max_size=30)
_status = st.sampled_from(["pending", "in_progress", "completed", "failed"])
_kind = st.sampled_from(["read", "edit", "execute", "think", "other"])

UPDATES = st.one_of(
    st.builds(helpers.update_agent_message_text, _text),
    st.builds(helpers.update_agent_thought_text, _text),
    st.builds(helpers.update_user_message_text, _text),
    st.builds(
        helpers.update_agent_message, st.builds(helpers.image_block, _text, st.just("image/png"))
    ),
    st.builds(
        lambda i, t, k, s, p: helpers.start_tool_call(
            i, t, kind=k, status=s, locations=[ToolCallLocation(path=p)], raw_input={"p": p}
        ),
        _text,
        _text,
        _kind,
        _status,
        _text,
    ),
    st.builds(
        lambda i, s, o: helpers.update_tool_call(
            i,
            status=s,
            raw_output={"out": o},
            content=[helpers.tool_content(helpers.text_block(o))],
        ),
        _text,
        st.none() | _status,
        _text,
    ),
    st.builds(
        lambda es: helpers.update_plan([helpers.plan_entry(c, status=s) for c, s in es]),
        st.lists(
            st.tuples(_text, st.sampled_from(["pending", "in_progress", "completed"])), max_size=3
        ),
    ),
    st.builds(
        lambda u, s, a: UsageUpdate(
            session_update="usage_update", used=u, size=s, cost=Cost(amount=a, currency="USD")
        ),
        st.integers(0, 10**6),
        st.integers(0, 10**6),
        st.floats(0, 100, allow_nan=False),
    ),
    st.builds(
        lambda n: AvailableCommandsUpdate(
            session_update="available_commands_update",
            available_commands=[AvailableCommand(name=n, description="d")],
        ),
        _text,
    ),
    st.builds(
        lambda m: CurrentModeUpdate(session_update="current_mode_update", current_mode_id=m), _text
    ),
)

_EXPECTED_TYPE = {
    "agent_message_chunk": "agent_message",
    "agent_thought_chunk": "agent_thought",
    "user_message_chunk": "user_message",
    "tool_call": "tool_call",
    "tool_call_update": "tool_call_update",
    "plan": "plan",
    "usage_update": "usage",
    "available_commands_update": "agent_state",
    "current_mode_update": "agent_state",
}


@given(updates=st.lists(UPDATES, min_size=1, max_size=6), turn=st.integers(0, 5), role=_text)
@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_acp_update_to_event_and_back(
    tmp_path: Path, updates: list[Any], turn: int, role: str
) -> None:
    raws = [u.model_dump(mode="json", by_alias=True, exclude_none=True) for u in updates]
    path = tmp_path / f"t-{abs(hash((turn, role, len(raws))))}.jsonl"
    path.unlink(missing_ok=True)
    with TrajectoryWriter(path) as writer:
        for raw in raws:
            event = event_from_update(raw, seq=writer.next_seq(), ts=TS, role=role, turn=turn)
            kind = raw["sessionUpdate"]
            assert event.type == _EXPECTED_TYPE[kind]
            assert event.update == raw  # the raw update is kept as it arrived
            if kind in ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk"):
                content = raw["content"]
                assert event.text == (content.get("text", "") if content["type"] == "text" else "")
            if kind in ("tool_call", "tool_call_update"):
                assert event.tool_call_id == raw["toolCallId"] and event.status == raw.get("status")
            if kind == "plan":
                assert event.entries == raw["entries"]
            if kind == "usage_update":
                assert (
                    event.context_used == raw["used"] and event.usage.cost == raw["cost"]["amount"]
                )
            writer.write(event)
    back = list(iter_events(path))
    assert [e.update for e in back] == raws
    assert all(e.role == role and e.turn == turn for e in back)
    merged = load(path)
    assert "".join(e.text for e in merged if isinstance(e, AgentMessageEvent)) == "".join(
        r["content"].get("text", "")
        for r in raws
        if r["sessionUpdate"] == "agent_message_chunk" and r["content"]["type"] == "text"
    )


@given(
    st.dictionaries(
        st.text(max_size=10),
        st.one_of(
            st.none(), st.integers(), st.text(max_size=10), st.lists(st.integers(), max_size=2)
        ),
        max_size=5,
    )
)
@settings(max_examples=100, deadline=None)
def test_any_malformed_update_still_becomes_an_event(update: dict[str, Any]) -> None:
    event = event_from_update(update, seq=0, ts=TS)
    assert event.update == update
    event_adapter().validate_json(event.model_dump_json())  # and it serializes to a valid line


V1_FILE = (
    '{"schema_version":1,"type":"header","job_name":"demo","rollout_name":"hello__1",'
    '"task_name":"hello","agents":["scripted"],"models":["scripted"],'
    '"started_at":"2025-06-01T12:00:00Z"}\n'
    '{"seq":0,"ts":"2025-06-01T12:00:01Z","type":"user_message","text":"hi","turn":0}\n'
)


def test_v1_file_keeps_loading(tmp_path: Path) -> None:
    from benchflow.trajectory.reader import load, read_header

    path = tmp_path / "old.jsonl"
    path.write_text(V1_FILE)
    header = read_header(path)
    assert (header.schema_version, header.job_name, header.trace_id) == (3, "demo", None)
    [event] = load(path)
    assert (event.type, event.text, event.trace_id, event.span_id) == ("user_message", "hi",
                                                                       None, None)


def test_v1_fixture_keeps_loading() -> None:
    from benchflow.trajectory.reader import iter_events, read_header

    path = Path(__file__).parents[2] / "fixtures" / "schemas" / "v1" / "acp_trajectory.jsonl"
    assert read_header(path).job_name == "demo"
    events = list(iter_events(path))
    assert len(events) >= 4 and all(e.trace_id is None for e in events)


def test_v2_fixture_keeps_loading() -> None:
    """A v2 file (trace ids, no roles or session_turn) loads as v3, and its claude tool call
    still merges to the real command and output."""
    from benchflow.trajectory.conversation import group_turns
    from benchflow.trajectory.reader import iter_events, read_header

    path = Path(__file__).parents[2] / "fixtures" / "schemas" / "v2" / "acp_trajectory.jsonl"
    header = read_header(path)
    assert (header.schema_version, header.roles, header.trace_id[:4]) == (3, {}, "d3f7")
    events = list(iter_events(path))
    assert all(e.session_turn is None for e in events)
    [block] = list(group_turns(events))
    [call] = block.tool_calls
    assert json.loads(call.arguments) == {"command": "printf '3\\n4\\n5\\n' > /app/numbers.txt"}
    assert call.output == "(Bash completed with no output)"


def test_writer_stamps_trace_and_span_ids(tmp_path: Path) -> None:
    from benchflow.trace_ids import TRACE_ID, TraceIds, tool_call_span_id

    ids = TraceIds.new("run_x")
    path = tmp_path / "t.jsonl"
    header = TrajectoryHeader(run_id=ids.run_id, trace_id=ids.trace_id, span_id=ids.span_id)
    with TrajectoryWriter(path, header) as writer:
        writer.record("user_message", text="a")
        writer.span_id = "00000000000000aa"
        writer.record("tool_call", tool_call_id="c1", update={})
        writer.record("tool_call_update", tool_call_id="c1", update={})
        writer.record("agent_message", text="b", update={})
    head, *events = [json.loads(line) for line in path.read_text().splitlines()]
    assert TRACE_ID.match(head["trace_id"]) and head["run_id"] == "run_x"
    assert all(e["trace_id"] == ids.trace_id for e in events)
    tool_span = tool_call_span_id(ids.trace_id, "c1")
    assert [e["span_id"] for e in events] == [ids.span_id, tool_span, tool_span,
                                               "00000000000000aa"]


@pytest.mark.parametrize("update", [
    _msg("hi"),
    {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "ls", "status": "pending"},
    {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed"},
    {"sessionUpdate": "tool_call_update", "toolCallId": "", "status": "failed"},
    {"sessionUpdate": "agent_message_chunk", "toolCallId": "x", "content": {"type": "text"}},
])
def test_an_event_built_with_the_stamp_is_written_as_the_writer_would_stamp_it(
    tmp_path: Path, update: dict[str, Any]
) -> None:
    from benchflow.trace_ids import TraceIds

    ids = TraceIds.new("run_x")
    header = TrajectoryHeader(trace_id=ids.trace_id, span_id=ids.span_id)
    lines = []
    for name, stamped in (("plain", False), ("stamped", True)):
        path = tmp_path / f"{name}.jsonl"
        with TrajectoryWriter(path, header) as writer:
            writer.span_id = "00000000000000aa"
            writer.context.update(skills=["pdf"], task_step=None)
            tool_call_id = update.get("toolCallId") if "tool_call" in update["sessionUpdate"] else None
            stamp = writer.stamp(tool_call_id) if stamped else {}
            writer.write(event_from_update(update, seq=writer.next_seq(), ts=TS, role="coder",
                                           **stamp), flush=False)
            writer.flush()
            lines.append(path.read_text().splitlines()[1])  # flushed: visible before close
    assert lines[0] == lines[1]
    event = json.loads(lines[1])
    assert (event["trace_id"], event["skills"]) == (ids.trace_id, ["pdf"])
    assert "task_step" not in event
    if update.get("toolCallId") and "tool_call" in update["sessionUpdate"]:
        assert event["span_id"] not in (ids.span_id, "00000000000000aa")  # the tool call's own
    else:
        assert event["span_id"] == "00000000000000aa"


def test_recording_one_event_type_builds_only_its_schema(tmp_path: Path) -> None:
    event_adapter.cache_clear()
    path = tmp_path / "acp_trajectory.jsonl"
    with TrajectoryWriter(path, TrajectoryHeader(rollout_name="r")) as writer:
        event = writer.record("oracle", command="bash solve.sh", exit_code=0)
        assert event_adapter.cache_info().currsize == 0  # the union's validator: not built
        with pytest.raises(ValidationError):
            writer.record("oracle", command="x", bogus=1)  # its own schema still forbids
        with pytest.raises(ValidationError):
            writer.record("nope")  # an unknown type: the union says which types exist
    assert type(event).__name__ == "OracleEvent"
    assert [e.type for e in iter_events(path)] == ["oracle"]
