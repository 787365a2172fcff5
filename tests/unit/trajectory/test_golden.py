"""The tool-call model, the exporters and the viewer on trajectories recorded from the real
agents (`tests/golden/job`, re-recorded by `make golden`): claude coder + codex reviewer,
gemini coder + opencode reviewer, against the scripted model server.

Each agent's own update shapes are asserted first (so a re-recording that changes them
fails here, naming the shape), then what the exports and the viewer make of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchflow.rollout.result import RolloutResult
from benchflow.trajectory.conversation import group_turns
from benchflow.trajectory.reader import iter_events, read_header
from benchflow.trajectory.tool_calls import ToolCall
from tests.conformance import faithful
from tests.golden.record import COMMANDS, GOLDEN_JOB

ROLLOUTS = {"claude+codex": ("claude", "codex"), "gemini+opencode": ("gemini", "opencode")}
SUM = "awk '{ s += $1 } END { print s }' /app/numbers.txt | tee /app/sum.txt"
REVIEW = "echo 'approved: 3+4+5 = 12' | tee /app/review.md"


def rollout(label: str) -> Path:
    return GOLDEN_JOB / label / "tasks" / "offline-coder-reviewer__1"


def raw(label: str) -> list[dict[str, Any]]:
    path = rollout(label) / "trajectory" / "acp_trajectory.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


def updates(label: str, role: str, command: str) -> list[dict[str, Any]]:
    """The raw ACP updates of the one tool call of `role` that ran `command`."""
    events = raw(label)
    ids = {e["tool_call_id"] for e in events if e.get("role") == role
           and e["type"] in ("tool_call", "tool_call_update")
           and command in json.dumps(e["update"], ensure_ascii=False)}
    assert len(ids) == 1, (label, role, command, ids)
    return [e["update"] for e in events if e.get("tool_call_id") in ids
            and e["type"] in ("tool_call", "tool_call_update")]


def merged(label: str, role: str, command: str) -> ToolCall:
    """The call as the viewer and exporters see it (all its events, tool results too)."""
    blocks = list(group_turns(iter_events(rollout(label) / "trajectory"
                                          / "acp_trajectory.jsonl")))
    calls = [c for b in blocks if b.role == role for c in b.tool_calls
             if faithful.names_command(c.arguments, command)]
    assert len(calls) == 1, (label, role, command, calls)
    return calls[0]


# -- each agent's shapes, as recorded -------------------------------------------------------

def test_claude_sends_empty_raw_input_then_the_command_in_an_update() -> None:
    shapes = updates("claude+codex", "coder", SUM)
    assert shapes[0]["sessionUpdate"] == "tool_call" and shapes[0]["rawInput"] == {}
    assert shapes[0]["title"] == "Terminal"
    assert any(u.get("rawInput") == {"command": SUM} for u in shapes[1:])
    final = shapes[-1]
    assert final["status"] == "completed" and final["rawOutput"] == "12"
    assert "```console" in final["content"][0]["content"]["text"]  # a fenced copy
    call = merged("claude+codex", "coder", SUM)
    assert json.loads(call.arguments) == {"command": SUM}
    assert (call.output, call.tool_name, call.title) == ("12", "Bash", SUM)


def test_opencode_sends_cwd_first_then_command_and_output_with_exit_code() -> None:
    shapes = updates("gemini+opencode", "reviewer", REVIEW)
    assert shapes[0]["sessionUpdate"] == "tool_call" and shapes[0]["rawInput"] == {"cwd": "/app"}
    assert any(u.get("rawInput", {}).get("command") == REVIEW for u in shapes[1:])
    final = shapes[-1]
    assert final["rawOutput"]["metadata"]["exit"] == 0
    call = merged("gemini+opencode", "reviewer", REVIEW)
    assert json.loads(call.arguments) == {"command": REVIEW, "cwd": "/app"}
    assert call.output.strip() == "approved: 3+4+5 = 12" and call.exit_code == 0


def test_codex_puts_argv_in_raw_input_and_output_in_formatted_output() -> None:
    command = COMMANDS["reviewer"][0][0]
    shapes = updates("claude+codex", "reviewer", command)
    assert shapes[0]["rawInput"]["command"][-1] == command
    final = shapes[-1]
    assert "output" not in final["rawOutput"]
    assert final["rawOutput"]["formatted_output"] == final["rawOutput"]["aggregated_output"]
    assert final["rawOutput"]["exit_code"] == 0
    call = merged("claude+codex", "reviewer", command)
    assert call.command == command and call.exit_code == 0
    # the raw output, not a fenced copy some versions add as content
    assert call.output == final["rawOutput"]["formatted_output"]
    assert call.output.split() == ["3", "4", "5", "12"]


def test_gemini_reports_no_arguments_nor_output_the_model_call_does() -> None:
    shapes = updates("gemini+opencode", "coder", SUM)
    assert all("rawInput" not in u and "rawOutput" not in u for u in shapes)
    assert shapes[0]["title"] == SUM
    assert shapes[0]["content"][0]["content"]["text"] == "[current working directory /app]"
    results = [e for e in raw("gemini+opencode") if e["type"] == "tool_result"]
    assert len(results) == len(COMMANDS["coder"])  # one per call, from the model calls
    assert all(r["source"] == "model_calls" and r["name"] == "run_shell_command"
               for r in results)
    call = merged("gemini+opencode", "coder", SUM)
    assert json.loads(call.arguments) == {"command": SUM}
    assert "Output: 12" in call.output and not call.preview
    assert call.tool_name == "run_shell_command"


# -- records around the calls ----------------------------------------------------------------

@pytest.mark.parametrize("label", sorted(ROLLOUTS))
def test_header_names_each_role_and_events_carry_session_turn(label: str) -> None:
    header = read_header(rollout(label) / "trajectory" / "acp_trajectory.jsonl")
    coder, reviewer = ROLLOUTS[label]
    assert {n: r.agent for n, r in header.roles.items()} == {"coder": coder,
                                                              "reviewer": reviewer}
    prompts = [e for e in raw(label) if e["type"] == "user_message"]
    assert [(p["role"], p["turn"], p["session_turn"]) for p in prompts] == [
        ("coder", 0, 0), ("reviewer", 1, 0), ("coder", 2, 0)]


@pytest.mark.parametrize("label", sorted(ROLLOUTS))
def test_usage_per_role_from_acp_or_model_calls(label: str) -> None:
    result = RolloutResult.model_validate_json((rollout(label) / "result.json").read_text())
    sources = {r.agent: r.usage_source for r in result.roles.values()}
    # claude and opencode report usage over ACP, codex and gemini do not
    expected = {"claude": "acp", "codex": "model_calls", "gemini": "model_calls",
                "opencode": "acp"}
    assert sources == {a: expected[a] for a in ROLLOUTS[label]}
    turn_usage = [e for e in raw(label) if e["type"] == "usage" and e.get("scope") == "turn"]
    for name, role in result.roles.items():
        mine = [e for e in turn_usage if e["role"] == name]
        assert mine and all(e["source"] == role.usage_source for e in mine)
        assert sum(e["usage"]["input_tokens"] for e in mine) <= role.tokens.input


def test_results_name_each_role_with_tokens() -> None:
    numbers = faithful.check_results(GOLDEN_JOB)
    assert numbers["claude+codex"]["reviewer"][0] == "codex"


def test_exports_have_every_command_and_real_output(tmp_path: Path) -> None:
    assert faithful.check_exports(GOLDEN_JOB, tmp_path) == {"sft": 4, "sharegpt": 4, "atif": 4}


def test_viewer_shows_every_command_output_and_role_agent() -> None:
    assert faithful.check_viewer(GOLDEN_JOB) > 0


def test_model_call_export_covers_all_four_apis(tmp_path: Path) -> None:
    lines, skipped = faithful.check_model_calls(GOLDEN_JOB, tmp_path)
    assert lines > 10
    assert skipped == "2 model calls skipped: 2 not a model reply (HEAD /)"


def test_model_calls_are_attributed_by_role_key_never_by_timing() -> None:
    """Each captured call names the role whose agent made it, with that role's turn."""
    for label, (coder, reviewer) in ROLLOUTS.items():
        path = rollout(label) / "model_calls.jsonl"
        calls = [json.loads(line) for line in path.read_text().splitlines()]
        posts = [c for c in calls if c["method"] == "POST"]
        agents = {"coder": coder, "reviewer": reviewer}
        assert posts and all(c["agent"] == agents[c["role"]] for c in posts)
        assert {c["turn"] for c in posts if c["role"] == "reviewer"} == {1}
        assert {c["turn"] for c in posts if c["role"] == "coder"} == {0, 2}
