"""A role keeps its agent process and ACP session for the whole scene, and the spec's phase
API (`connect_as` / `execute` / `disconnect`) called by hand leaves what `run()` leaves.

The scripted agent's `recall` action replies with the prompts its session received before,
and `echo pid=$PPID` (run by the agent itself) prints its process id: together they show
whether a later turn is the same process and the same conversation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchflow import Role, Rollout, RolloutConfig, RolloutResult, Scene, Turn
from benchflow.task import load_task
from benchflow.trajectory import AgentMessageEvent, ToolCallUpdateEvent, UserMessageEvent

from .conftest import TASKS
from .test_scenes import assert_no_container, check_result_file, events_of

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

CODER_REVIEWER = TASKS / "coder-reviewer"
PID = {"type": "shell", "via": "local", "command": "echo pid=$PPID"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def scripts(folder: Path) -> Path:
    """Coder: note its pid, write a file; later: pid again and recall its prompts.
    Reviewer: read the file, recall (nothing: its own session), note its pid."""
    path = folder / "script.yaml"
    path.write_text(yaml.safe_dump({"roles": {
        "coder": {"turns": [
            {"actions": [PID, {"type": "write_file", "path": "notes.txt", "content": "v1"},
                         {"type": "message", "text": "wrote v1"}]},
            {"repeat": True, "actions": [PID, {"type": "recall"}]}]},
        "reviewer": {"turns": [
            {"repeat": True, "actions": [PID, {"type": "read_file", "path": "notes.txt",
                                              "echo": True}, {"type": "recall"}]}]},
    }}))
    return path


def review_scene(script: Path, *, coder: dict[str, Any] | None = None,
                 third: dict[str, Any] | None = None) -> Scene:
    return Scene(name="review-loop", roles=[
        Role(name="coder", agent="scripted", model=str(script), **(coder or {})),
        Role(name="reviewer", agent="scripted", model=str(script))],
        turns=[Turn(role="coder"), Turn(role="reviewer", prompt="Review notes.txt."),
               Turn(role="coder", prompt="What did I ask you first?", **(third or {}))])


def pids(events: list, role: str) -> list[str]:
    out = []
    for e in events:
        if isinstance(e, ToolCallUpdateEvent) and e.role == role:
            raw = e.update.get("rawOutput")
            if isinstance(raw, dict) and str(raw.get("output", "")).startswith("pid="):
                out.append(str(raw["output"]).strip())
    return out


def recalled(events: list, role: str, turn: int) -> list[str]:
    texts = [e.text for e in events if isinstance(e, AgentMessageEvent)
             and (e.role, e.turn) == (role, turn)]
    return json.loads(texts[-1])


async def test_coder_reviewer_coder_the_coder_remembers_its_first_turn(tmp_path, job_label):
    instruction = load_task(CODER_REVIEWER).instruction
    config = RolloutConfig(task_path=CODER_REVIEWER, scenes=[review_scene(scripts(tmp_path))],
                           jobs_dir=tmp_path, job_name=job_label, verifier_disabled=True)
    rollout = Rollout(config)
    result = await rollout.run()
    assert result.error is None, result.error
    check_result_file(result, rollout.paths)
    assert_no_container(job_label, result.rollout_name)

    events = events_of(rollout.paths.trajectory)
    prompts = [e for e in events if isinstance(e, UserMessageEvent)]
    assert [(p.role, p.turn, p.session_turn) for p in prompts] == [
        ("coder", 0, 0), ("reviewer", 1, 0), ("coder", 2, 1)]
    coder_sessions = {e.session_id for e in events if e.role == "coder"}
    assert len(coder_sessions) == 1  # the third turn is in the first turn's session
    assert coder_sessions.isdisjoint({e.session_id for e in events if e.role == "reviewer"})
    first, third = pids(events, "coder")
    assert first == third  # ...of the same agent process, kept while the reviewer worked
    assert pids(events, "reviewer") != [first]  # the reviewer is its own process
    assert recalled(events, "coder", 2) == [instruction]  # it remembers its first prompt
    assert recalled(events, "reviewer", 1) == []
    reads = [e.text for e in events if isinstance(e, AgentMessageEvent)
             and e.role == "reviewer" and e.text == "v1"]
    assert reads == ["v1"]  # the shared workspace: the reviewer read what the coder wrote


@pytest.mark.parametrize("where", ["role", "turn"])
async def test_session_fresh_starts_the_coder_over(tmp_path, job_label, where):
    script = scripts(tmp_path)
    scene = (review_scene(script, coder={"session": "fresh"}) if where == "role"
             else review_scene(script, third={"session": "fresh"}))
    result = await Rollout(RolloutConfig(
        task_path=CODER_REVIEWER, scenes=[scene], jobs_dir=tmp_path,
        job_name=f"{job_label}-{where}", verifier_disabled=True)).run()
    assert result.error is None, result.error
    events = result.trajectory  # loaded from trajectory_path
    assert [(e.role, e.session_turn) for e in events if isinstance(e, UserMessageEvent)] == [
        ("coder", 0), ("reviewer", 0), ("coder", 0)]
    assert len({e.session_id for e in events if e.role == "coder"}) == 2
    first, third = pids(events, "coder")
    assert first != third  # a new agent process
    assert recalled(events, "coder", 2) == []  # with no memory of the first turn


async def test_phases_by_hand_as_the_spec_draws_them(tmp_path, job_label):
    """setup -> start -> install_agent -> (connect_as -> execute -> disconnect)* ->
    verify -> cleanup -> finish: the same result.json, timings and trajectory as run()."""
    task = load_task(CODER_REVIEWER)
    assert task.scenes is not None
    scenes = task.scenes.to_scenes("scripted", str(CODER_REVIEWER / "scripted.yaml"))
    rollout = Rollout(RolloutConfig(task_path=CODER_REVIEWER, scenes=scenes,
                                    jobs_dir=tmp_path, job_name=job_label))
    await rollout.setup()
    await rollout.start()
    await rollout.install_agent()
    await rollout.connect_as("coder")
    await rollout.execute([task.instruction])
    await rollout.disconnect()
    await rollout.connect_as("reviewer")
    await rollout.execute("Review the current workspace and write /app/review.md.")
    await rollout.disconnect()
    await rollout.connect_as("coder")
    await rollout.execute(["Read /app/review.md and revise fizzbuzz.py accordingly."])
    await rollout.disconnect()
    await rollout.verify()
    await rollout.cleanup()
    result = await rollout.finish()

    assert result.error is None, result.error
    assert (result.reward, result.n_prompts) == (1.0, 3)
    check_result_file(result, rollout.paths)
    assert_no_container(job_label, result.rollout_name)
    d = result.durations
    assert None not in (d.total_sec, d.environment_setup_sec, d.agent_setup_sec,
                        d.agent_execution_sec, d.verifier_sec)
    assert (rollout.paths.root / "config.json").is_file()
    assert "rollout ends: reward 1.0" in rollout.paths.log.read_text()
    prompts = [e for e in result.trajectory if isinstance(e, UserMessageEvent)]
    assert [(p.role, p.turn, p.session_turn) for p in prompts] == [
        ("coder", 0, 0), ("reviewer", 1, 0), ("coder", 2, 1)]


async def test_a_failing_phase_by_hand_is_recorded_like_run_records_it(tmp_path, job_label):
    script = tmp_path / "crash.yaml"
    script.write_text(yaml.safe_dump({"roles": {"coder": {"turns": [
        {"actions": [{"type": "crash", "exit_code": 3}]}]}}}))
    scene = Scene(roles=[Role(name="coder", agent="scripted", model=str(script))],
                  turns=[Turn(role="coder")])
    rollout = Rollout(RolloutConfig(task_path=CODER_REVIEWER, scenes=[scene],
                                    jobs_dir=tmp_path, job_name=job_label))
    await rollout.setup()
    await rollout.start()
    await rollout.install_agent()
    await rollout.connect_as("coder")
    with pytest.raises(Exception) as raised:
        await rollout.execute("go")
    await rollout.cleanup()
    result = await rollout.finish()

    assert result.error is not None
    assert (result.error.type, result.error.phase) == ("agent_execution_failed",
                                                        "agent_execution")
    assert type(raised.value).__name__ == "AgentExitedError"
    assert result.reward is None and rollout.paths.error.is_file()
    on_disk = RolloutResult.model_validate_json(rollout.paths.result.read_text())
    assert on_disk == result
    assert_no_container(job_label, result.rollout_name)


async def test_connect_as_an_unknown_role_is_a_config_error(tmp_path, job_label):
    scene = Scene.single(agent="nop", role="coder")
    rollout = Rollout(RolloutConfig(task_path=CODER_REVIEWER, scenes=[scene],
                                    jobs_dir=tmp_path, job_name=job_label))
    await rollout.setup()
    await rollout.start()
    await rollout.install_agent()
    with pytest.raises(Exception, match="no role 'ghost'.*roles: coder"):
        await rollout.connect_as("ghost")
    result = await rollout.finish()  # cleans up what was not cleaned
    assert result.error is not None and result.error.type == "config_invalid"
    assert_no_container(job_label, result.rollout_name)
