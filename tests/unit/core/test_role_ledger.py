"""Per-role results: identities (the agent's default model when none was given), counts per
role, tokens from the model calls for agents that report none, tool results filled in."""

from __future__ import annotations

import json
from pathlib import Path

from benchflow.agents.base import StepOutcome
from benchflow.config import Role, Scene, Turn
from benchflow.model_server.traffic import ModelTraffic
from benchflow.model_server.wire import CallTokens
from benchflow.rollout.result import RolloutResult
from benchflow.rollout.roles import RoleLedger, configured_roles, role_identities
from benchflow.steps import desugar
from benchflow.trajectory.writer import TrajectoryWriter

SCENE = Scene(name="review", roles=[Role(name="coder", agent="claude", model="claude-x"),
                                    Role(name="reviewer", agent="codex")],
              turns=[Turn(role="coder"), Turn(role="reviewer"), Turn(role="coder")])


def test_identities_fill_the_agents_default_model() -> None:
    identities = role_identities([SCENE])
    assert (identities["coder"].agent, identities["coder"].model) == ("claude", "claude-x")
    assert (identities["reviewer"].agent, identities["reviewer"].model) == ("codex",
                                                                             "gpt-5.3-codex")
    oracle = role_identities([Scene.single(agent="oracle")])
    assert oracle["agent"].model is None
    assert configured_roles([SCENE]) == {"coder"}


def test_ledger_counts_roles_and_takes_tokens_from_model_calls(tmp_path: Path) -> None:
    identities = role_identities([SCENE])
    traffic = ModelTraffic(identities)
    ledger = RoleLedger(identities, traffic, configured=configured_roles([SCENE]))
    writer = TrajectoryWriter(tmp_path / "t.jsonl")
    # the coder (claude) reports usage over ACP; the reviewer (codex) does not
    traffic.count("coder", CallTokens(50, 5), model="claude-x", main=True)
    ledger.record("coder", StepOutcome(n_tool_calls=2, input_tokens=50, output_tokens=5,
                                       cost=0.1, reported_usage=True), writer,
                  scene="review", turn=0, session_turn=0)
    traffic.count("reviewer", CallTokens(700, 9), model="gpt-5.4", main=True)
    traffic.note_tools("reviewer", "/v1/responses", {"input": [
        {"type": "function_call", "call_id": "call_1", "name": "exec_command",
         "arguments": "{\"cmd\": \"cat sum.txt\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "12"}]})
    ledger.record("reviewer", StepOutcome(n_tool_calls=1, incomplete_tool_calls=["call_1"]),
                  writer, scene="review", turn=1, session_turn=0)
    traffic.count("reviewer", CallTokens(20, 1))  # a late call: counted in the totals
    writer.close()
    events = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()[1:]]
    assert [(e["type"], e["role"], e.get("source")) for e in events] == [
        ("usage", "reviewer", "model_calls"), ("tool_result", "reviewer", "model_calls")]
    assert events[0]["usage"] == {"input_tokens": 700, "output_tokens": 9}
    assert (events[1]["tool_call_id"], events[1]["output"]) == ("call_1", "12")
    result = RolloutResult(job_name="j", rollout_name="r", task_name="t", dataset_name="d",
                           agent_name="claude+codex", attempt=1)
    ledger.finish(result)
    coder, reviewer = result.roles["coder"], result.roles["reviewer"]
    assert (coder.usage_source, coder.tokens.input, coder.cost, coder.n_tool_calls) == (
        "acp", 50, 0.1, 2)
    assert (reviewer.usage_source, reviewer.tokens.input, reviewer.tokens.output) == (
        "model_calls", 720, 10)
    assert reviewer.model == "gpt-5.4"  # the model its calls asked for, not the default
    assert (result.tokens.input, result.n_tool_calls, result.n_prompts, result.cost) == (
        770, 3, 2, 0.1)
    assert result.model == "claude-x+gpt-5.4"


def test_session_turns_index_prompts_within_a_session() -> None:
    steps = desugar([SCENE, SCENE.model_copy(update={"name": "again"})], "do it")
    assert [(s.scene, s.role.name, s.turn_index, s.session_turn) for s in steps] == [
        ("review", "coder", 0, 0), ("review", "reviewer", 1, 0), ("review", "coder", 2, 1),
        ("again", "coder", 0, 0), ("again", "reviewer", 1, 0), ("again", "coder", 2, 1)]
    twice = Scene(roles=[Role(name="a", agent="nop")], turns=[Turn(role="a"), Turn(role="a")])
    assert [s.session_turn for s in desugar([twice], "x")] == [0, 1]
