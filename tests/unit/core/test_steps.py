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


def plan(steps):
    return [(s.scene_index, s.role.name, s.turn_index, s.session, s.session_turn,
             s.ends_session) for s in steps]


def test_a_role_keeps_its_session_for_the_whole_scene():
    scene = Scene(roles=[CODER, REVIEWER], turns=[
        Turn(role="coder"), Turn(role="coder", prompt="again"), Turn(role="reviewer"),
        Turn(role="coder")])
    steps = desugar([scene, scene.model_copy(update={"name": "second"})], "x")
    assert plan(steps) == [
        # coder -> reviewer -> coder: the coder's third turn continues its first session
        (0, "coder", 0, 0, 0, False), (0, "coder", 1, 0, 1, False),
        (0, "reviewer", 2, 1, 0, True), (0, "coder", 3, 0, 2, True),
        # a new scene starts every role over, even the role that had the last turn
        (1, "coder", 0, 2, 0, False), (1, "coder", 1, 2, 1, False),
        (1, "reviewer", 2, 3, 0, True), (1, "coder", 3, 2, 2, True),
    ]
    assert [[s.turn_index for s in g] for g in session_groups(steps)] == [
        [0, 1, 3], [2], [0, 1, 3], [2]]


def test_a_fresh_turn_starts_the_role_over_and_later_turns_continue_the_new_session():
    scene = Scene(roles=[CODER, REVIEWER], turns=[
        Turn(role="coder"), Turn(role="reviewer"), Turn(role="coder", session="fresh"),
        Turn(role="reviewer"), Turn(role="coder")])
    assert plan(desugar([scene], "x")) == [
        (0, "coder", 0, 0, 0, True), (0, "reviewer", 1, 1, 0, False),
        (0, "coder", 2, 2, 0, False), (0, "reviewer", 3, 1, 1, True),
        (0, "coder", 4, 2, 1, True)]


def test_a_fresh_role_shares_a_session_only_between_consecutive_turns():
    fresh = CODER.model_copy(update={"session": "fresh"})
    scene = Scene(roles=[fresh, REVIEWER], turns=[
        Turn(role="coder"), Turn(role="coder"), Turn(role="reviewer"), Turn(role="coder")])
    assert plan(desugar([scene], "x")) == [
        (0, "coder", 0, 0, 0, False), (0, "coder", 1, 0, 1, True),
        (0, "reviewer", 2, 1, 0, True), (0, "coder", 3, 2, 0, True)]


def test_two_roles_of_one_agent_program_are_two_sessions():
    second = CODER.model_copy(update={"name": "tester", "model": "m2"})
    scene = Scene(roles=[CODER, second], turns=[
        Turn(role="coder"), Turn(role="tester"), Turn(role="coder"), Turn(role="tester")])
    assert [(s.role.name, s.session) for s in desugar([scene], "x")] == [
        ("coder", 0), ("tester", 1), ("coder", 0), ("tester", 1)]


def test_role_permissions_and_session_fields_are_validated():
    role = Role(name="reviewer", agent="nop", workspace="read-only", outputs=["review.md"])
    assert (role.workspace, role.outputs, role.session) == ("read-only", ["review.md"],
                                                            "persistent")
    for bad in ("/etc/passwd", "../x", "a/../../x", ""):
        with pytest.raises(ValidationError, match="inside the workspace"):
            Role(name="r", agent="nop", outputs=[bad])
    with pytest.raises(ValidationError, match="workspace"):
        Role(name="r", agent="nop", workspace="write-only")
    with pytest.raises(ValidationError, match="session"):
        Turn(role="r", session="persistent")


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


def test_the_concepts_spec_examples_build_as_written():
    import inspect
    from pathlib import Path

    import benchflow as bf
    from benchflow import RolloutConfig, Scene

    config = RolloutConfig(
        task_path=Path("tasks/edit-pdf"),
        scenes=[Scene.single(agent="gemini", model="gemini-3.1-pro-preview")],
        environment="daytona",
    )
    assert inspect.iscoroutinefunction(bf.run) and config.environment == "daytona"
    scene = Scene(
        name="review-loop",
        roles=[
            Role(name="coder", agent="opencode", model="anthropic/claude-sonnet-4-6"),
            Role(name="reviewer", agent="gemini", model="gemini-3.1-pro-preview"),
        ],
        turns=[
            Turn(role="coder"),
            Turn(role="reviewer", prompt="Review the current workspace."),
            Turn(role="coder", prompt="Read the reviewer's feedback and revise."),
        ],
    )
    steps = desugar([scene], "the task")
    # the spec: the ACP session persists across a role's turns in a scene
    assert [(s.role.name, s.session, s.session_turn) for s in steps] == [
        ("coder", 0, 0), ("reviewer", 1, 0), ("coder", 0, 1)]
    for name in ("setup", "start", "install_agent", "connect_as", "execute", "disconnect",
                 "verify", "cleanup", "finish", "run"):
        assert inspect.iscoroutinefunction(getattr(bf.Rollout, name)), name
