"""Desugaring scenes into steps: prompt precedence, grouping into sessions, validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from benchflow.config import Role, RolloutConfig, Scene, Turn
from benchflow.steps import desugar, resolve_prompt, session_groups

CODER = Role(name="coder", agent="scripted", model="m1")
REVIEWER = Role(name="reviewer", agent="nop")


def review_scene(name: str = "review") -> Scene:
    return Scene(name=name, roles=[CODER, REVIEWER], turns=[
        Turn(role="coder"), Turn(role="reviewer", prompt="Review it."), Turn(role="coder"),
    ])


def test_prompt_precedence_turn_then_scene_then_role_then_instruction():
    prompts = {"scene.s": "scene prompt", "role.r": "role prompt"}
    assert resolve_prompt("turn", "s", "r", prompts, "instr") == "turn"
    assert resolve_prompt(None, "s", "r", prompts, "instr") == "scene prompt"
    assert resolve_prompt(None, "other", "r", prompts, "instr") == "role prompt"
    assert resolve_prompt(None, "other", "x", prompts, "instr") == "instr"
    assert resolve_prompt("", "s", "r", prompts, "instr") == ""  # an explicit empty prompt wins


def test_desugar_flattens_scenes_in_order_with_indices():
    steps = desugar([review_scene("a"), Scene.single(agent="oracle")], "do it",
                    {"role.reviewer": "unused: the turn has its own prompt"})
    assert [(s.scene, s.scene_index, s.turn_index, s.role.name, s.prompt) for s in steps] == [
        ("a", 0, 0, "coder", "do it"),
        ("a", 0, 1, "reviewer", "Review it."),
        ("a", 0, 2, "coder", "do it"),
        ("main", 1, 0, "agent", "do it"),
    ]
    assert steps[0].role is CODER


def test_session_groups_keep_consecutive_turns_of_one_role_together():
    scene = Scene(roles=[CODER, REVIEWER], turns=[
        Turn(role="coder"), Turn(role="coder", prompt="again"), Turn(role="reviewer"),
        Turn(role="coder")])
    steps = desugar([scene, scene.model_copy(update={"name": "second"})], "x")
    groups = session_groups(steps)
    assert [[(s.scene_index, s.role.name, s.turn_index) for s in g] for g in groups] == [
        [(0, "coder", 0), (0, "coder", 1)], [(0, "reviewer", 2)], [(0, "coder", 3)],
        # a new scene reconnects even when the role is the same as the last one
        [(1, "coder", 0), (1, "coder", 1)], [(1, "reviewer", 2)], [(1, "coder", 3)],
    ]


def test_turn_naming_an_undeclared_role_is_rejected():
    with pytest.raises(ValidationError, match="names role 'ghost'.*declared: coder"):
        Scene(roles=[CODER], turns=[Turn(role="ghost")])


def test_duplicate_role_names_are_rejected():
    with pytest.raises(ValidationError, match="duplicate role names"):
        Scene(roles=[CODER, CODER], turns=[Turn(role="coder")])


def test_single_scene_and_agent_labels():
    config = RolloutConfig(task_path="t", scenes=[Scene.single(agent="claude", model="sonnet")])
    assert config.agent_name == "claude" and config.model_name == "sonnet"
    multi = RolloutConfig(task_path="t", scenes=[review_scene()])
    assert multi.agent_name == "scripted+nop" and multi.model_name == "m1"


def test_unknown_config_keys_fail_with_their_name():
    with pytest.raises(ValidationError, match="scenez"):
        RolloutConfig.model_validate({"task_path": "t", "scenes": [], "scenez": []})
