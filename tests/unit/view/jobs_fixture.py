"""A jobs folder written with benchflow's own models and trajectory writer: two jobs, two
agents, a two-role trajectory (prompt, plan, thought, tool call + result, usage), a failed
trial, a running trial, and a secret in a config."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchflow.job.models import build_job_result
from benchflow.paths import RolloutPaths
from benchflow.rollout.result import Durations, ErrorInfo, RolloutResult, Timestamps
from benchflow.trajectory import TrajectoryHeader, TrajectoryWriter

T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SECRET = "sk-live-DO-NOT-LEAK-1234"
LONG_OUTPUT = "x" * 5000 + "END-OF-LONG-OUTPUT"


def _result(job: str, agent: str, task: str, attempt: int, reward: float | None,
            error: ErrorInfo | None = None, start: datetime = T0) -> RolloutResult:
    ts = Timestamps(started_at=start, environment_setup_started_at=start,
                    environment_setup_ended_at=start + timedelta(seconds=1),
                    agent_setup_started_at=start + timedelta(seconds=1),
                    agent_setup_ended_at=start + timedelta(seconds=2),
                    agent_execution_started_at=start + timedelta(seconds=2),
                    agent_execution_ended_at=start + timedelta(seconds=8),
                    verifier_started_at=start + timedelta(seconds=8),
                    verifier_ended_at=start + timedelta(seconds=9),
                    ended_at=start + timedelta(seconds=9))
    return RolloutResult(
        job_name=job, rollout_name=f"{agent}/ds/{task}__{attempt}", task_name=task,
        dataset_name="ds", agent_name=agent, model="m-1", attempt=attempt, reward=reward,
        rewards=None if reward is None else {"reward": reward}, error=error,
        durations=Durations(total_sec=9.0, environment_setup_sec=1.0, agent_setup_sec=1.0,
                            agent_execution_sec=6.0, verifier_sec=1.0),
        timestamps=ts, n_tool_calls=1, n_prompts=2)


def write_two_role_trajectory(path: Path, *, extra_events: int = 0) -> None:
    w = TrajectoryWriter(path, TrajectoryHeader(job_name="job-a", task_name="t1",
                                                agents=["scripted"], models=["m-1"]))
    common = {"scene": "review-loop", "session_id": "s1"}
    w.record("agent_state", role="coder", name="model", update={"requested": "m-1"}, **common)
    w.record("user_message", role="coder", turn=0, text="Write fizzbuzz.py", **common)
    w.record("plan", role="coder", turn=0, entries=[{"content": "write it", "status": "pending"}],
             update={"sessionUpdate": "plan"}, **common)
    w.record("agent_thought", role="coder", turn=0, text="I should think first",
             update={"sessionUpdate": "agent_thought_chunk",
                     "content": {"type": "text", "text": "I should think first"}}, **common)
    w.record("tool_call", role="coder", turn=0, tool_call_id="call-1", title="cat notes.txt",
             kind="execute", status="in_progress",
             update={"sessionUpdate": "tool_call", "toolCallId": "call-1",
                     "rawInput": {"command": "cat notes.txt"}}, **common)
    w.record("tool_call_update", role="coder", turn=0, tool_call_id="call-1", status="completed",
             update={"sessionUpdate": "tool_call_update", "toolCallId": "call-1",
                     "status": "completed",
                     "content": [{"type": "content",
                                  "content": {"type": "text", "text": LONG_OUTPUT}}]}, **common)
    w.record("agent_message", role="coder", turn=0, text="Draft written.",
             update={"sessionUpdate": "agent_message_chunk",
                     "content": {"type": "text", "text": "Draft written."}}, **common)
    w.record("usage", role="coder", turn=0, scope="turn",
             usage={"input_tokens": 120, "output_tokens": 30}, **common)
    w.record("workspace_changes", role="coder", turn=0, changes=[
        {"path": "fizzbuzz.py", "change": "created", "size": 12, "sha256": "ab" * 32,
         "diff": "--- a/fizzbuzz.py\n+++ b/fizzbuzz.py\n+print('FIZZ-DIFF')\n"},
        {"path": "tests/conftest.py", "change": "deleted", "flagged": True}], **common)
    common = {"scene": "review-loop", "session_id": "s2"}
    w.record("user_message", role="reviewer", turn=1, text="Review fizzbuzz.py", **common)
    w.record("tool_call", role="reviewer", turn=1, tool_call_id="call-1", title="run tests",
             kind="execute", status="in_progress",
             update={"sessionUpdate": "tool_call", "toolCallId": "call-1",
                     "rawInput": {"command": "pytest"}}, **common)
    w.record("tool_call_update", role="reviewer", turn=1, tool_call_id="call-1",
             status="completed",
             update={"sessionUpdate": "tool_call_update", "toolCallId": "call-1",
                     "status": "completed", "rawOutput": {"output": "3 passed"}}, **common)
    w.record("agent_message", role="reviewer", turn=1, text="LGTM from the reviewer.",
             update={"sessionUpdate": "agent_message_chunk",
                     "content": {"type": "text", "text": "LGTM from the reviewer."}}, **common)
    for i in range(extra_events):
        w.record("agent_message", role="reviewer", turn=1, text=f"chunk {i} ",
                 update={"sessionUpdate": "agent_message_chunk",
                         "content": {"type": "text", "text": f"chunk {i} "}}, **common)
    w.close()


def make_jobs(root: Path) -> Path:
    """jobs/job-a (finished: 3 trials) and jobs/job-b (running: 1 finished, 1 running)."""
    results = []
    for agent, task, attempt, reward, error in [
        ("scripted", "t1", 1, 1.0, None),
        ("scripted", "t2", 1, 0.0, None),
        ("other", "t1", 1, None, ErrorInfo(type="agent_execution_timeout",
                                           message="agent ran over 300s",
                                           phase="agent_execution")),
    ]:
        r = _result("job-a", agent, task, attempt, reward, error)
        paths = RolloutPaths.for_trial(root, "job-a", agent, "ds", task, attempt)
        paths.mkdirs()
        paths.result.write_text(r.model_dump_json(indent=2))
        paths.config.write_text(json.dumps({"scenes": [{"roles": [
            {"name": "coder", "env": {"OPENAI_API_KEY": SECRET}},
            {"name": "reviewer", "env": {}}]}]}))
        (paths.verifier_dir).mkdir()
        (paths.verifier_dir / "stdout.txt").write_text(f"verifier says {task} {reward}\n")
        results.append(r)
        if (agent, task) == ("scripted", "t1"):
            write_two_role_trajectory(paths.trajectory)
    job_a = build_job_result("job-a", results, [], cancelled=False, started_at=T0,
                             ended_at=T0 + timedelta(seconds=20))
    (root / "job-a" / "result.json").write_text(job_a.model_dump_json(indent=2))
    (root / "job-a" / "config.json").write_text("{}")

    later = T0 + timedelta(hours=1)
    done = _result("job-b", "scripted", "t1", 1, 1.0, start=later)
    paths = RolloutPaths.for_trial(root, "job-b", "scripted", "ds", "t1", 1)
    paths.mkdirs()
    paths.result.write_text(done.model_dump_json())
    running = RolloutPaths.for_trial(root, "job-b", "scripted", "ds", "t2", 1)
    running.mkdirs()
    write_two_role_trajectory(running.trajectory)
    (root / "job-b" / "config.json").write_text("{}")
    return root
