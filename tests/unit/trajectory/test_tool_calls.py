"""The merge rules of the one tool-call model (`benchflow/trajectory/tool_calls.py`), each on
the smallest update sequence that exercises it (the real agents' sequences are in
`test_golden.py`)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchflow.trajectory.tool_calls import (
    ToolCall,
    ToolCallTracker,
    matches_wire_id,
    raw_output_text,
    tool_calls,
)


def _call(*updates: dict) -> ToolCall:
    first, *rest = updates
    [call] = tool_calls([{"sessionUpdate": "tool_call", "toolCallId": "c", **first},
                         *({"sessionUpdate": "tool_call_update", "toolCallId": "c", **u}
                           for u in rest)]).values()
    return call


def test_a_later_non_empty_raw_input_wins_and_empty_never_hides_it() -> None:
    call = _call({"rawInput": {}}, {"rawInput": {"command": "ls"}}, {"rawInput": {}})
    assert json.loads(call.arguments) == {"command": "ls"}
    call = _call({"rawInput": {"cwd": "/app"}}, {"rawInput": {"command": "ls", "cwd": "/app"}})
    assert call.input == {"command": "ls", "cwd": "/app"}
    assert _call({"rawInput": "ls -la"}).input == "ls -la"


def test_no_arguments_falls_back_to_the_title() -> None:
    assert json.loads(_call({"title": "Read file"}).arguments) == {"title": "Read file"}


@pytest.mark.parametrize(("raw", "text"), [
    ("plain", "plain"),
    ({"output": "a"}, "a"),
    ({"formatted_output": "b", "aggregated_output": "c"}, "b"),
    ({"formatted_output": "", "aggregated_output": "c"}, "c"),
    ({"stdout": "out\n", "stderr": "err\n"}, "out\nerr\n"),
    ({"content": [{"type": "text", "text": "mcp"}]}, "mcp"),
    ({"unknown": 1}, ""),
    (None, ""),
])
def test_raw_output_shapes(raw: object, text: str) -> None:
    assert raw_output_text(raw) == text


def test_raw_output_wins_over_fenced_content_and_later_output_replaces_earlier() -> None:
    fenced = {"type": "content", "content": {"type": "text", "text": "```console\n12\n```"}}
    call = _call({}, {"content": [fenced], "rawOutput": "12", "status": "completed"})
    assert (call.output, call.status) == ("12", "completed")
    call = _call({}, {"content": [{"type": "content", "content": {"type": "text",
                                                                  "text": "partial"}}]},
                 {"rawOutput": {"output": "final", "metadata": {"exit": 3}}})
    assert (call.output, call.exit_code) == ("final", 3)
    assert _call({}, {"rawOutput": {"exit_code": 0, "stdout": ""}}).exit_code == 0
    diff = {"type": "diff", "path": "/app/a.py", "newText": "x = 1\n"}
    assert _call({}, {"content": [diff]}).output == "--- /app/a.py\nx = 1\n"


def test_the_opening_content_is_a_preview_that_results_replace() -> None:
    note = [{"type": "content", "content": {"type": "text", "text": "[cwd /app]"}}]
    call = _call({"content": note, "title": "ls"}, {"status": "completed", "content": []})
    assert call.preview and call.output == "[cwd /app]"
    tracker = ToolCallTracker(calls={"c": call})
    assert tracker.incomplete() == ["c"]
    call.apply_model_result(arguments={"command": "ls"}, output="a.txt", name="run_shell_command")
    assert (call.output, call.preview, call.tool_name) == ("a.txt", False, "run_shell_command")
    assert json.loads(call.arguments) == {"command": "ls"}
    kept = _call({"rawInput": {"command": "ls"}}, {"rawOutput": "real"})
    kept.apply_model_result(arguments={"command": "other"}, output="model", name=None)
    assert (kept.input, kept.output) == ({"command": "ls"}, "real")  # ACP's own data wins


def test_status_title_kind_last_non_empty_and_claude_tool_name() -> None:
    call = _call({"title": "Terminal", "kind": "execute", "status": "pending",
                  "_meta": {"claudeCode": {"toolName": "Bash"}}},
                 {"title": "ls /app"}, {"status": "completed"})
    assert (call.title, call.tool_kind, call.status, call.tool_name) == (
        "ls /app", "execute", "completed", "Bash")
    assert call.command == "ls /app"
    codex = _call({"kind": "execute", "rawInput": {"command": ["/bin/sh", "-lc", "ls"]}})
    assert codex.command == "ls"
    assert _call({"kind": "read", "title": "a"}).command is None


def test_wire_ids_match_gemini_prefixed_acp_ids() -> None:
    assert matches_wire_id("run_shell_command__run_shell_command_17_0", "run_shell_command_17_0")
    assert matches_wire_id("toolu_1", "toolu_1")
    assert not matches_wire_id("toolu_12", "2") and not matches_wire_id("a", "")


_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)


@given(st.lists(st.dictionaries(
    st.sampled_from(["rawInput", "rawOutput", "content", "title", "kind", "status", "_meta"]),
    _values, max_size=5), min_size=1, max_size=5))
@settings(max_examples=200, deadline=None)
def test_any_update_sequence_merges_without_raising(updates: list[dict]) -> None:
    call = _call(*updates)
    json.loads(call.arguments)
    assert isinstance(call.output, str)
