"""`update_line` writes the exact line `event_from_update(...).model_dump_json` would."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchflow.trajectory.events import (
    event_adapter,
    event_from_update,
    stream_head,
    streamed_update_line,
    update_line,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
kinds = st.sampled_from(["agent_message_chunk", "agent_thought_chunk", "user_message_chunk",
                         "tool_call", "tool_call_update", "plan", "usage_update",
                         "available_commands_update", "something_new"])
content = st.one_of(
    json_values,
    st.fixed_dictionaries({"type": st.just("text"), "text": json_values}),
    st.fixed_dictionaries({"type": st.just("resource"),
                           "resource": st.fixed_dictionaries({"text": st.text()})}),
)
updates = st.builds(
    lambda kind, extra, body: {"sessionUpdate": kind, **extra, **body},
    kinds,
    st.dictionaries(st.text(max_size=6), json_values, max_size=3),
    st.fixed_dictionaries({}, optional={
        "content": content, "toolCallId": json_values, "title": json_values,
        "kind": json_values, "status": json_values}),
)
commons = st.fixed_dictionaries(
    {"seq": st.integers(0, 10**9),
     "ts": st.datetimes(timezones=st.just(UTC))},
    optional={"scene": st.none() | st.text(), "role": st.none() | st.text(),
              "turn": st.none() | st.integers(0, 100), "round": st.none() | st.integers(0, 9),
              "session_id": st.none() | st.text(), "trace_id": st.none() | st.text(),
              "span_id": st.none() | st.text(), "skills": st.none() | st.lists(st.text()),
              "task_step": st.none() | st.text()},
)


@settings(max_examples=400, deadline=None)
@given(update=updates, common=commons)
def test_the_line_is_the_models_json_byte_for_byte(update, common):
    expected = event_from_update(update, **common).model_dump_json(exclude_none=True).encode()
    assert update_line(update, **common) == expected


@settings(max_examples=400, deadline=None)
@given(update=updates, common=commons)
def test_the_line_from_a_turns_head_is_the_same_line(update, common):
    """`streamed_update_line` (the common fields gathered once per turn) writes what
    `update_line` writes, or None for the kinds it leaves to `update_line`."""
    head = {k: v for k, v in common.items() if k not in ("seq", "ts")}
    line = streamed_update_line(update, common["seq"], common["ts"], stream_head(**head))
    if line is not None:
        assert line == update_line(update, **common)
    else:
        assert update["sessionUpdate"] not in ("agent_message_chunk", "agent_thought_chunk",
                                               "user_message_chunk", "tool_call",
                                               "tool_call_update")


def test_a_head_refuses_what_is_no_event_field():
    assert stream_head(role="coder", nosuch=1) is None
    assert stream_head(seq=1) is None
    assert stream_head(role="coder", turn=None, scene="main") == {"scene": "main",
                                                                   "role": "coder"}


def test_a_streamed_update_reads_back_as_its_event():
    ts = datetime(2026, 11, 23, 12, 0, 0, 123456, tzinfo=UTC)
    update = {"sessionUpdate": "tool_call", "toolCallId": 7, "title": "ls", "status": None,
              "content": [{"type": "content", "content": {"type": "text", "text": "é"}}]}
    line = update_line(update, seq=3, ts=ts, role="coder", turn=1, trace_id="a" * 32)
    event = event_adapter().validate_json(line)
    assert event == event_from_update(update, seq=3, ts=ts, role="coder", turn=1,
                                      trace_id="a" * 32)
    assert event.tool_call_id == "7" and event.status is None and event.ts == ts


def test_an_integer_orjson_cannot_write_goes_through_the_model():
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"},
              "big": 2**70}
    ts = datetime(2026, 1, 1, tzinfo=UTC)
    assert update_line(update, seq=0, ts=ts) == event_from_update(
        update, seq=0, ts=ts).model_dump_json(exclude_none=True).encode()


def test_an_unknown_field_is_refused_as_the_model_would():
    with pytest.raises(TypeError, match="nosuch"):
        update_line({"sessionUpdate": "agent_message_chunk"}, seq=0,
                    ts=datetime(2026, 1, 1, tzinfo=UTC), nosuch=1)
