"""A real agent (claude) in a coder -> reviewer -> coder scene against benchflow's scripted
model server, offline: the coder's memory is real and the read-only reviewer's
permissions are the OS's.

The model script answers by the conversation's first user message: the coder's
("CODER: ...") and the reviewer's ("REVIEWER: ..."). The coder's third turn continues at
the right step only if its conversation still starts with its first prompt, i.e. the ACP
session (and claude's context) persisted; a new session would start with "Now add them
up" and get the script's fallback text "NO MEMORY".

Asserted: the coder's turns share one ACP session id; its third turn's model request
holds the first turn's prompt and tool result; the reviewer (its own Unix user,
`workspace: read-only`, `outputs: [review.md]`) gets EACCES writing /app/x, which does not
exist afterwards, while its review.md is written; the role switch gaps are printed.

    pytest -m slow tests/conformance/test_real_agent_scenes.py     (make test-scenes)
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from benchflow.agents.base import StepOutcome
from benchflow.config import ModelEndpoint, Role, RolloutConfig, Scene, Turn
from benchflow.rollout import Rollout
from benchflow.steps import Step
from tests.conformance import offline

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.anyio]

CODER_FIRST = "CODER: write the numbers 3, 4 and 5 to /app/numbers.txt."
REVIEWER_FIRST = "REVIEWER: check /app/numbers.txt and write your review to /app/review.md."
CODER_AGAIN = "Now add them up and write the sum to /app/sum.txt."


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class TimedRollout(Rollout):
    """Notes when each turn ends and when the next prompt goes out (the switch gap)."""

    marks: list[tuple[str, float]]

    def _enter_step(self, step: Step) -> None:
        super()._enter_step(step)
        self.marks.append(("send", time.monotonic()))

    async def _after_step(self, step: Step, outcome: StepOutcome) -> None:
        self.marks.append(("end", time.monotonic()))  # then what benchflow does between turns
        await super()._after_step(step, outcome)


def model_script(folder: Path) -> Path:
    path = folder / "scene-model.yaml"
    path.write_text(yaml.safe_dump({"name": "coder-reviewer-coder", "answers": [
        {"match": "CODER: write the numbers", "steps": [
            {"shell": "printf '3\\n4\\n5\\n' > /app/numbers.txt && cat /app/numbers.txt"},
            {"text": "Wrote the numbers."},
            {"shell": "awk '{ s += $1 } END { print s }' /app/numbers.txt | tee /app/sum.txt"},
            {"shell": "ls -a /app"},
            {"text": "The sum is 12."}]},
        {"match": "REVIEWER: check", "steps": [
            {"shell": "id -un; cat /app/numbers.txt; touch /app/x; echo rc=$?"},
            {"shell": "echo LGTM > /app/review.md && cat /app/review.md"},
            {"text": "Reviewed: LGTM."}]}],
        "steps": [{"text": "NO MEMORY"}]}))
    return path


def review_scene(reviewer_model: str | None = None) -> Scene:
    return Scene(name="review", roles=[
        Role(name="coder", agent="claude"),
        Role(name="reviewer", agent="claude", model=reviewer_model, workspace="read-only",
             outputs=["review.md"])],
        turns=[Turn(role="coder", prompt=CODER_FIRST),
               Turn(role="reviewer", prompt=REVIEWER_FIRST),
               Turn(role="coder", prompt=CODER_AGAIN)])


@pytest.fixture(scope="module")
async def original(tmp_path_factory, job_label):
    """The coder/reviewer rollout with claude in both roles, turns snapshotted."""
    folder = tmp_path_factory.mktemp("real-scenes")
    rollout = TimedRollout(RolloutConfig(
        task_path=offline.TASK, scenes=[review_scene()], jobs_dir=folder, job_name=job_label,
        model_endpoint=ModelEndpoint(script=model_script(folder)), verifier_disabled=True,
        snapshot_turns=True))
    rollout.marks = []
    result = await rollout.run()
    yield rollout, result
    from benchflow.rollout.snapshots import remove_snapshots

    await remove_snapshots([rollout.paths.root])


@pytest.mark.timeout(1500)
async def test_claude_coder_remembers_across_the_reviewer_and_the_reviewer_is_read_only(
        original, request):
    rollout, result = original
    assert result.error is None, result.error
    root = rollout.paths.root
    events = offline.events(root)

    # one ACP session for the coder's first and third turns
    prompts = [e for e in events if e.get("type") == "user_message" and "update" not in e]
    assert [(p["role"], p["turn"], p.get("session_turn")) for p in prompts] == [
        ("coder", 0, 0), ("reviewer", 1, 0), ("coder", 2, 1)]
    assert prompts[0]["session_id"] == prompts[2]["session_id"] != prompts[1]["session_id"]
    coder_sessions = {e.get("session_id") for e in events
                      if e.get("role") == "coder" and e.get("session_id")}
    assert len(coder_sessions) == 1

    # the memory is real: the third turn's model requests hold the first turn
    third = [r for r in offline.requests(root)
             if CODER_AGAIN in json.dumps(r.get("body") or {})]
    assert third, "no model request of the coder's third turn"
    body = third[-1]["body"]
    assert CODER_FIRST in json.dumps(body)
    assert any("3\n4\n5" in t for t in offline.tool_results("anthropic", body))
    calls = offline.tool_calls(events)
    assert any(c.mentions("12") for c in calls.values())  # the sum, at the right step
    assert "NO MEMORY" not in json.dumps([e.get("text") for e in events])

    # the read-only reviewer: its own user, EACCES on /app/x, its review.md written
    reviewer = [c for c in calls.values() if c.mentions("touch /app/x")]
    assert reviewer and reviewer[0].mentions("Permission denied")
    assert reviewer[0].mentions("agent-reviewer") and reviewer[0].mentions("rc=1")
    assert any(c.mentions("LGTM") for c in calls.values() if c.mentions("review.md"))
    listing = [c for c in calls.values() if c.mentions("ls -a /app")]
    assert listing and listing[0].mentions("review.md") and not any(
        line.strip() == "x" for t in listing[0].texts for line in t.splitlines())

    gaps = []
    last_end = None
    for kind, at in rollout.marks:
        if kind == "end":
            last_end = at
        elif last_end is not None:
            gaps.append(at - last_end)
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"\nclaude coder/reviewer: switch gaps {[round(g, 3) for g in gaps]}"
                            f" s (reviewer's first includes its start), agent phase "
                            f"{result.durations.agent_execution_sec} s")


@pytest.mark.timeout(1500)
async def test_fork_at_the_reviewer_restores_the_claude_coder_session(original, tmp_path):
    """Fork at turn 1 with another reviewer (the scripted agent): the coder's third turn
    restores its first turn's session (ACP session/load from the snapshot), so its
    conversation, and the model script's position in it, go on from the first turn."""
    from benchflow.roles import RoleAgent
    from benchflow.job.job import run_fork
    from benchflow.rollout.fork import plan_fork

    rollout, first = original
    assert first.error is None, first.error
    other = tmp_path / "other-reviewer.yaml"
    other.write_text(yaml.safe_dump({"roles": {"reviewer": {"turns": [{"actions": [
        {"type": "shell", "command": "cat /app/numbers.txt; touch /app/x; echo rc=$?"},
        {"type": "write_file", "path": "/app/review.md", "content": "Second opinion: ok\n"},
        {"type": "message", "text": "scripted reviewer done"}]}]}}}))
    plan = await plan_fork(rollout.paths.root, 1,
                           {"reviewer": RoleAgent("scripted", str(other))},
                           jobs_dir=tmp_path, job_name="fork-real")
    assert plan.configs[0].fork is not None and "coder" in plan.configs[0].fork.sessions
    (result,) = await run_fork(plan)
    assert result.error is None, result.error
    assert result.parent is not None and result.parent.turn == 1
    (root,) = [p.parent for p in (tmp_path / "fork-real").glob("*/*/*/result.json")]
    events = offline.events(root)
    loads = [e for e in events if e.get("type") == "agent_state"
             and e.get("name") == "session_load"]
    assert [e["role"] for e in loads] == ["coder"]  # restored, not summarised
    prompts = [e for e in events if e.get("type") == "user_message" and "update" not in e]
    assert [(p["role"], p["turn"]) for p in prompts] == [("reviewer", 1), ("coder", 2)]
    assert prompts[1]["text"] == CODER_AGAIN  # no summary prompt: the agent remembers
    third = [r for r in offline.requests(root)
             if CODER_AGAIN in json.dumps(r.get("body") or {})]
    assert third and CODER_FIRST in json.dumps(third[-1]["body"])
    assert any("3\n4\n5" in t for t in offline.tool_results("anthropic", third[-1]["body"]))
    assert any(c.mentions("12") for c in offline.tool_calls(events).values())
    # the other reviewer ran, read-only like the first
    calls = offline.tool_calls([e for e in events if e.get("role") == "reviewer"])
    (probe,) = [c for c in calls.values() if c.mentions("touch /app/x")]
    assert probe.mentions("Permission denied") and probe.mentions("rc=1")
    assert any(e.get("text") == "scripted reviewer done" for e in events)
