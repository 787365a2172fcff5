"""A run of update notifications recorded at once (`UpdateRecorder.on_updates`, the
transport's `on_updates`) leaves what recording them one by one (`on_receive`) leaves:
the same trajectory bytes, numbering, turn text, tool call state and buffered updates."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchflow.acp import recorder as recorder_module
from benchflow.acp.recorder import UpdateRecorder
from benchflow.acp.transport import UPDATES_PER_STEP, ProcessTransport
from benchflow.trajectory import TrajectoryHeader, TrajectoryWriter

from .test_acp_parts import _Chunks

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)
kinds = st.sampled_from(["agent_message_chunk", "agent_thought_chunk", "user_message_chunk",
                         "tool_call", "tool_call_update", "usage_update", "plan", "new_kind"])
text_block = st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=12)})
contents = st.one_of(text_block, text_block, text_block, json_values,
                     st.fixed_dictionaries({"type": st.just("text"), "text": json_values}),
                     st.fixed_dictionaries({"type": st.just("image"), "text": st.text()}))
updates = st.builds(
    lambda kind, body: {"sessionUpdate": kind, **body},
    kinds,
    st.fixed_dictionaries({}, optional={
        "content": contents, "toolCallId": st.sampled_from(["t1", "t2", 3]),
        "status": st.sampled_from(["pending", "completed", "failed", None]),
        "rawInput": json_values, "title": json_values}),
)
session_ids = st.sampled_from(["s1", "s1", "s1", "s2", "late", None])
notifications = st.builds(
    lambda sid, update: {"jsonrpc": "2.0", "method": "session/update",
                         "params": {"sessionId": sid, "update": update}},
    session_ids, updates)
odd = st.sampled_from([
    {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1"}},
    {"jsonrpc": "2.0", "method": "session/update", "params": ["s1"]},
    {"jsonrpc": "2.0", "method": "session/update",
     "params": {"sessionId": "s1", "update": "text"}},
    {"jsonrpc": "2.0", "method": "session/update",
     "params": {"sessionId": "s1", "update": {"sessionUpdate": ["agent_message_chunk"]}}},
])
runs = st.lists(st.lists(notifications | odd, min_size=1, max_size=8), max_size=6)


def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same timestamps for both recorders (one per update, in order)."""
    start = datetime(2026, 1, 2, tzinfo=UTC)
    ticks = itertools.count()
    monkeypatch.setattr(recorder_module, "_utc_now",
                        lambda: start + timedelta(microseconds=next(ticks)))


def _record(path: Path, runs: list[list[dict[str, Any]]], together: bool,
            monkeypatch: pytest.MonkeyPatch, reference: bool = False
            ) -> tuple[bytes, tuple[Any, ...]]:
    """The file and the recorder's state after `runs`; `reference`: every update written
    the long way (`update_line` with `writer.stamp`, no head gathered per turn)."""
    _fixed_clock(monkeypatch)
    with monkeypatch.context() as patched:
        if reference:
            patched.setattr(UpdateRecorder, "_stream_head", lambda *args: None)
        return anyio.run(_recorded, path, runs, together, backend="asyncio")


async def _recorded(path: Path, runs: list[list[dict[str, Any]]], together: bool
                    ) -> tuple[bytes, tuple[Any, ...]]:
    writer = TrajectoryWriter(path, TrajectoryHeader(started_at=datetime(2026, 1, 1, tzinfo=UTC)))
    writer.trace_id, writer.span_id = "a" * 32, "b" * 16
    recorder = UpdateRecorder(writer, scene="main", role="coder")
    recorder.add_session("s1")
    recorder.add_session("s2")
    recorder.begin_turn(0, None, 0)
    for i, run in enumerate(runs):
        if together:
            recorder.on_updates(json.loads(json.dumps(run)))
        else:
            for message in json.loads(json.dumps(run)):
                recorder.on_receive(message)
        if i == 1:  # between runs: a new step span and context, a session becomes known
            writer.span_id = "c" * 16
            writer.context["skills"] = ["lint"]
            recorder.add_session("late")
        elif i == 2:  # no step span (a tool call's own span still written)
            writer.span_id = None
        elif i == 3:  # no trace at all
            writer.trace_id = None
        elif i == 4:  # a new turn
            recorder.begin_turn(1, 2, 1)
    state = (recorder.n_updates, recorder.n_tool_calls, recorder.turn_tool_calls,
             recorder.turn_text(), recorder.busy, recorder.incomplete_tool_calls(),
             recorder.session_cost, [p[:4] for p in recorder._pending], writer.n_events)
    recorder.flush_pending()
    writer.close()
    return path.read_bytes(), state


@settings(max_examples=300, deadline=None)
@given(runs=runs)
def test_a_run_recorded_at_once_leaves_what_one_by_one_leaves(runs, tmp_path_factory):
    with pytest.MonkeyPatch.context() as monkeypatch:
        folder = tmp_path_factory.mktemp("runs")
        one_by_one = _record(folder / "one.jsonl", runs, False, monkeypatch)
        together = _record(folder / "run.jsonl", runs, True, monkeypatch)
        reference = _record(folder / "ref.jsonl", runs, False, monkeypatch, reference=True)
    assert together == one_by_one == reference


GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "job"


@pytest.mark.parametrize("pair", ["claude+codex", "gemini+opencode"])
def test_the_real_agents_updates_recorded_in_runs_are_the_same_lines(pair, tmp_path,
                                                                     monkeypatch):
    """The updates the four real agents sent (the golden recordings), as they arrived
    for each role's session, recorded in runs and one by one."""
    path = GOLDEN / pair / "tasks" / "offline-coder-reviewer__1" / "trajectory"
    events = [json.loads(line)
              for line in (path / "acp_trajectory.jsonl").read_text().splitlines()]
    messages = [{"jsonrpc": "2.0", "method": "session/update",
                 "params": {"sessionId": "s1" if e["role"] == "coder" else "s2",
                            "update": e["update"]}}
                for e in events if isinstance(e.get("update"), dict)]
    assert len(messages) > 20
    runs = [messages[i:i + 5] for i in range(0, len(messages), 5)]
    one_by_one = _record(tmp_path / "one.jsonl", runs, False, monkeypatch)
    assert _record(tmp_path / "run.jsonl", runs, True, monkeypatch) == one_by_one
    assert _record(tmp_path / "ref.jsonl", runs, False, monkeypatch, reference=True) == one_by_one
    assert one_by_one[0].count(b"\n") == len(messages) + 1


@pytest.mark.anyio
async def test_a_run_without_a_trajectory_keeps_the_turns_state():
    recorder = UpdateRecorder(None, scene=None, role=None)
    chunk = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}
    call = {"sessionUpdate": "tool_call", "toolCallId": "t1", "status": "pending"}
    recorder.on_updates([{"method": "session/update", "params": {"sessionId": "s", "update": u}}
                         for u in (chunk, call, chunk)])
    assert (recorder.n_updates, recorder.n_tool_calls, recorder.turn_text(), recorder.busy) == (
        3, 1, "hihi", True)


class _Process:
    def __init__(self, chunks: list[bytes]) -> None:
        self.stdout = _Chunks(chunks)


@settings(max_examples=100, deadline=None)
@given(kinds=st.lists(st.sampled_from(["update", "answer", "noise", "blank"]), max_size=200),
       cut=st.integers(1, 400))
def test_the_transport_hands_runs_in_wire_order(kinds: list[str], cut: int) -> None:
    """Updates go to `on_updates` in runs of at most `UPDATES_PER_STEP`, every other
    message to `on_receive` and on to the SDK, all in wire order, however the bytes are
    cut; without `on_updates` the same messages go to `on_receive` one by one."""
    lines = []
    for i, kind in enumerate(kinds):
        if kind == "update":
            lines.append(json.dumps({"jsonrpc": "2.0", "method": "session/update",
                                     "params": {"n": i}}))
        elif kind == "answer":
            lines.append(json.dumps({"jsonrpc": "2.0", "id": i, "result": {"n": i}}))
        else:
            lines.append("not json" if kind == "noise" else "  ")
    data = ("\n".join(lines) + "\n").encode()
    reads = [data[i:i + cut] for i in range(0, len(data), cut)]

    async def drain(transport: ProcessTransport) -> list[Any]:
        out = []
        while (message := await transport.receive()) is not None:
            out.append(message)
        return out

    seen: list[Any] = []
    sizes: list[int] = []
    with_runs = ProcessTransport(
        _Process(reads),  # type: ignore[arg-type]
        on_receive=lambda m: seen.append(("one", m.get("id", m.get("params")))),
        on_updates=lambda run: (sizes.append(len(run)),
                                seen.extend(("one", m["params"]) for m in run)))
    to_sdk = anyio.run(drain, with_runs, backend="asyncio")
    one_seen: list[Any] = []
    one_by_one = ProcessTransport(
        _Process(reads),  # type: ignore[arg-type]
        on_receive=lambda m: one_seen.append(("one", m.get("id", m.get("params")))))
    assert to_sdk == anyio.run(drain, one_by_one, backend="asyncio")
    assert seen == one_seen
    assert [m["id"] for m in to_sdk] == [i for i, k in enumerate(kinds) if k == "answer"]
    assert sum(sizes) == kinds.count("update")
    assert all(0 < size <= UPDATES_PER_STEP for size in sizes)
    assert with_runs.noise.count == one_by_one.noise.count == kinds.count("noise")
