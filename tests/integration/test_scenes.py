"""Scenes, roles and turns through the whole Rollout, with the scripted ACP agent in Docker.

Each test runs one rollout end to end (build or reuse the image, install the agent, run
the steps, verify, clean up) and checks what a user reads afterwards: `result.json`
(reward, error type, prompt and tool-call counts, tokens, cost, trajectory path) and the
trajectory (wire order, scene/role/turn attribution, sessions, errors).

The fixture tasks `scenes-answer` and `scenes-handoff` share the Dockerfile of
`tasks/coder-reviewer` (debian + python3), so one image build serves every test here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest
import yaml

import benchflow
from benchflow import Role, Rollout, RolloutConfig, RolloutResult, Scene, Turn
from benchflow.paths import RolloutPaths
from benchflow.sandbox.docker import LABEL_JOB, LABEL_ROLLOUT
from benchflow.task import load_task
from benchflow.trajectory import (
    AgentMessageEvent,
    ErrorEvent,
    Event,
    ToolCallUpdateEvent,
    UserMessageEvent,
    iter_events,
    load,
    read_header,
)

from tests.fakes.clock import JumpClockLoop, advance, wait_until

from .conftest import FIXTURES, TASKS

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

ANSWER = FIXTURES / "tasks" / "scenes-answer"
HANDOFF = FIXTURES / "tasks" / "scenes-handoff"
CODER_REVIEWER = TASKS / "coder-reviewer"
WRITE_42 = {"type": "shell", "command": "echo 42 > answer.txt"}
BENCHFLOW_CLI = Path(sys.executable).with_name("benchflow")


@pytest.fixture(scope="module")
def anyio_backend() -> tuple[str, dict[str, Any]]:
    return "asyncio", {"loop_factory": JumpClockLoop}  # timeouts fire on jumps (clock.py)


# -- helpers ---------------------------------------------------------------------------


def script(folder: Path, turns: Sequence[dict[str, Any]], role: str = "agent") -> Path:
    """A scripted-agent script file playing `turns` for `role`."""
    path = folder / f"{role}-script.yaml"
    path.write_text(yaml.safe_dump({"roles": {role: {"turns": list(turns)}}}))
    return path


def single(script_path: Path, **role: Any) -> list[Scene]:
    """One role `agent` of the scripted agent, one turn (the task instruction)."""
    return [Scene(roles=[Role(name="agent", agent="scripted", model=str(script_path), **role)],
                  turns=[Turn(role="agent")])]


async def run_rollout(task: Path, scenes: list[Scene], jobs_dir: Path, job: str,
                      **config: Any) -> tuple[RolloutResult, RolloutPaths]:
    rollout = Rollout(RolloutConfig(task_path=task, scenes=scenes, jobs_dir=jobs_dir,
                                    job_name=job, **config))
    result = await rollout.run()
    check_result_file(result, rollout.paths)
    assert_no_container(job, result.rollout_name)
    return result, rollout.paths


def check_result_file(result: RolloutResult, paths: RolloutPaths) -> None:
    """result.json holds what run() returned, and names the trajectory it wrote."""
    on_disk = RolloutResult.model_validate_json(paths.result.read_text())
    assert on_disk == result
    assert result.trajectory_path == str(paths.trajectory)
    assert paths.trajectory.is_file()


def assert_no_container(job: str, rollout_name: str) -> None:
    labels = [f"{LABEL_JOB}={job}", f"{LABEL_ROLLOUT}={rollout_name}"]
    left = docker.from_env().containers.list(all=True, filters={"label": labels})
    assert not left, f"containers left behind: {[c.name for c in left]}"


def events_of(path: Path, agents: Sequence[str] = ("scripted",)) -> list[Event]:
    """Every event unmerged, after checking the file's invariants: a header naming the
    rollout, then events whose `seq` strictly increases in file order."""
    header = read_header(path)
    assert header.agents == list(agents)
    events = list(iter_events(path))
    seqs = [e.seq for e in events]
    assert seqs == sorted(set(seqs)), "seq must strictly increase in file order"
    return events


def prompts(events: Sequence[Event]) -> list[UserMessageEvent]:
    return [e for e in events if isinstance(e, UserMessageEvent)]


def messages(events: Sequence[Event], **where: Any) -> list[str]:
    return [e.text for e in events if isinstance(e, AgentMessageEvent)
            and all(getattr(e, k) == v for k, v in where.items())]


def tool_outputs(events: Sequence[Event], **where: Any) -> list[str]:
    """The `rawOutput.output` of every finished tool call (shell actions report it)."""
    out = []
    for e in events:
        if isinstance(e, ToolCallUpdateEvent) and all(getattr(e, k) == v
                                                        for k, v in where.items()):
            raw = e.update.get("rawOutput")
            if isinstance(raw, dict) and "output" in raw:
                out.append(str(raw["output"]))
    return out


def errors(events: Sequence[Event]) -> list[ErrorEvent]:
    return [e for e in events if isinstance(e, ErrorEvent)]


def cli(*args: str, env: dict[str, str] | None = None,
        timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BENCHFLOW_CLI), *args], check=False, capture_output=True,
                          text=True, env={**(env or os.environ), "COLUMNS": "200"},
                          timeout=timeout)


# -- one role ----------------------------------------------------------------------------


async def test_single_turn_scores_and_reports_counts_tokens_and_cost(tmp_path, job_label):
    path = script(tmp_path, [{"actions": [
        WRITE_42,
        {"type": "usage", "input_tokens": 120, "output_tokens": 30, "cost": 0.0125},
        {"type": "message", "text": "Wrote "}, {"type": "message", "text": "answer.txt."}]}])
    config = RolloutConfig(task_path=ANSWER, scenes=single(path), jobs_dir=tmp_path,
                           job_name=job_label)
    result = await benchflow.run(config)  # the one-liner

    assert result.error is None, result.error
    assert (result.reward, result.n_prompts, result.n_tool_calls) == (1.0, 1, 1)
    assert result.tokens is not None
    assert (result.tokens.input, result.tokens.output) == (120, 30)
    assert result.cost == pytest.approx(0.0125)
    assert_no_container(job_label, result.rollout_name)
    trajectory = Path(result.trajectory_path or "")
    assert json.loads((trajectory.parents[1] / "result.json").read_text())["reward"] == 1.0
    assert read_header(trajectory).job_name == job_label

    events = events_of(trajectory)
    assert {(e.scene, e.role) for e in events} == {("main", "agent")}
    assert len({e.session_id for e in events}) == 1
    (prompt,) = prompts(events)
    assert prompt.text == load_task(ANSWER).instruction and prompt.turn == 0
    assert messages(events) == ["Wrote ", "answer.txt."]
    merged = load(trajectory)  # chunks of one turn come back as one message
    assert [(e.text, e.chunks) for e in merged if isinstance(e, AgentMessageEvent)] == [
        ("Wrote answer.txt.", 2)]
    (turn_usage,) = [e for e in merged if e.type == "usage" and e.scope == "turn"]
    assert turn_usage.usage is not None and turn_usage.usage.input_tokens == 120


async def test_multi_turn_keeps_the_session_so_the_agent_remembers(tmp_path, job_label):
    path = script(tmp_path, [
        {"actions": [{"type": "write_file", "path": "answer.txt", "content": "42"},
                     {"type": "usage", "input_tokens": 10, "output_tokens": 5, "cost": 0.25},
                     {"type": "message", "text": "first turn done"}]},
        {"actions": [{"type": "echo_prompt"}, {"type": "recall"},
                     {"type": "usage", "input_tokens": 1, "output_tokens": 2, "cost": 0.5}]},
    ])
    scene = Scene(roles=[Role(name="agent", agent="scripted", model=str(path))],
                  turns=[Turn(role="agent"), Turn(role="agent", prompt="What did I ask first?")])
    result, paths = await run_rollout(ANSWER, [scene], tmp_path, job_label)

    assert result.error is None, result.error
    assert (result.reward, result.n_prompts, result.n_tool_calls) == (1.0, 2, 1)
    assert result.tokens is not None
    assert (result.tokens.input, result.tokens.output) == (11, 7)  # summed over turns
    assert result.cost == pytest.approx(0.75)

    events = events_of(paths.trajectory)
    assert [(p.turn, p.text) for p in prompts(events)] == [
        (0, load_task(ANSWER).instruction), (1, "What did I ask first?")]
    assert len({e.session_id for e in events}) == 1  # one session for both turns
    assert sum(e.type == "agent_state" for e in events) == 1  # one session/new
    echoed, recalled = messages(events, turn=1)
    assert echoed == "What did I ask first?"
    assert json.loads(recalled) == [load_task(ANSWER).instruction]  # it remembers turn 0


# -- several roles, several scenes ---------------------------------------------------------


async def test_coder_reviewer_three_steps_two_roles_shared_files(tmp_path, job_label):
    task = load_task(CODER_REVIEWER)
    assert task.scenes is not None
    scenes = task.scenes.to_scenes("scripted", str(CODER_REVIEWER / "scripted.yaml"))
    result, paths = await run_rollout(CODER_REVIEWER, scenes, tmp_path, job_label)

    assert result.error is None, result.error
    assert (result.reward, result.n_prompts, result.n_tool_calls) == (1.0, 3, 6)
    assert result.tokens is None and result.cost is None  # this script reports no usage

    events = events_of(paths.trajectory)
    steps = [(p.role, p.turn) for p in prompts(events)]
    assert steps == [("coder", 0), ("reviewer", 1), ("coder", 2)]
    assert {e.scene for e in events} == {"review-loop"}
    # every event after a prompt belongs to that prompt's role and turn, in its session
    current: UserMessageEvent | None = None
    sessions: dict[str | None, set[str | None]] = {}
    for e in events:
        if isinstance(e, UserMessageEvent):
            current = e
        elif current is not None and e.type != "agent_state":
            assert (e.role, e.turn, e.session_id) == (
                current.role, current.turn, current.session_id), e
        sessions.setdefault(e.role, set()).add(e.session_id)
    # the coder keeps its session across the reviewer's turn: two sessions in all
    assert len(sessions["coder"]) == 1 and len(sessions["reviewer"]) == 1
    assert not sessions["coder"] & sessions["reviewer"]
    assert [(p.role, p.session_turn) for p in prompts(events)] == [
        ("coder", 0), ("reviewer", 0), ("coder", 1)]
    # shared files: the reviewer ran the coder's draft; the coder then read the review
    assert any("['Fizz', 'Buzz', 'Fizz']" in o
               for o in tool_outputs(events, role="reviewer"))
    assert any("must return \"FizzBuzz\"" in m for m in messages(events, role="coder", turn=2))
    for role in ("coder", "reviewer"):  # each role's own file, made at its first stderr bytes
        stderr = paths.agent_dir / f"{role}.stderr.txt"
        assert not stderr.exists() or stderr.stat().st_size > 0


def handoff_script(folder: Path) -> Path:
    """The solver's two prompts, one per scene: leave notes, then answer from them.

    `echo $PPID` (run by the agent itself) prints the agent process's pid."""
    pid = {"type": "shell", "via": "local", "command": "echo pid=$PPID"}
    return script(folder, [
        {"actions": [pid, {"type": "write_file", "path": "notes.md", "content": "42"},
                     {"type": "message", "text": "noted"}]},
        {"actions": [pid, {"type": "recall"}, {"type": "read_file", "path": "notes.md"},
                     {"type": "shell", "command": "cp notes.md answer.txt"}]},
    ], role="solver")


def check_handoff(result: RolloutResult, trajectory: Path) -> None:
    assert result.error is None, result.error
    assert (result.reward, result.n_prompts, result.n_tool_calls) == (1.0, 2, 5)
    events = events_of(trajectory)
    assert [(p.scene, p.role, p.turn) for p in prompts(events)] == [
        ("learn", "solver", 0), ("apply", "solver", 0)]
    by_scene = {scene: [e for e in events if e.scene == scene] for scene in ("learn", "apply")}
    assert all(by_scene.values()) and len(by_scene["learn"]) + len(by_scene["apply"]) == len(
        events)
    learn_sessions = {e.session_id for e in by_scene["learn"]}
    apply_sessions = {e.session_id for e in by_scene["apply"]}
    assert len(learn_sessions) == len(apply_sessions) == 1
    assert learn_sessions != apply_sessions  # a new session...
    pids = {scene: [o for o in tool_outputs(evs) if o.startswith("pid=")]
            for scene, evs in by_scene.items()}
    assert len(pids["learn"]) == len(pids["apply"]) == 1
    assert pids["learn"] != pids["apply"]  # ...in a new agent process
    assert messages(by_scene["apply"]) == ["[]"]  # which remembers no earlier prompt
    # while the sandbox persisted: scene 2 read and copied what scene 1 wrote (reward 1)


async def test_two_scenes_restart_the_agent_and_keep_the_files(tmp_path, job_label):
    task = load_task(HANDOFF)
    assert task.scenes is not None
    scenes = task.scenes.to_scenes("scripted", str(handoff_script(tmp_path)))
    assert [s.name for s in scenes] == ["learn", "apply"]
    result, paths = await run_rollout(HANDOFF, scenes, tmp_path, job_label)
    check_handoff(result, paths.trajectory)


def test_cli_run_with_a_scenes_file(tmp_path, job_label):
    role = {"name": "solver", "agent": "scripted", "model": str(handoff_script(tmp_path))}
    scenes_file = tmp_path / "scenes.yaml"
    scenes_file.write_text(yaml.safe_dump({"scenes": [
        {"name": "learn", "roles": [role],
         "turns": [{"role": "solver", "prompt": "Write the answer to /app/notes.md."}]},
        {"name": "apply", "roles": [role], "turns": [{"role": "solver"}]},
    ]}))
    jobs_dir = tmp_path / "jobs"
    done = cli("run", str(HANDOFF), "--scenes", str(scenes_file), "--jobs-dir", str(jobs_dir),
               "--job-name", job_label)
    assert done.returncode == 0, done.stdout + done.stderr
    (result_file,) = (jobs_dir / job_label).glob("*/*/*/result.json")
    result = RolloutResult.model_validate_json(result_file.read_text())
    assert result.agent_name == "scripted"
    assert result.trajectory_path is not None
    check_handoff(result, Path(result.trajectory_path))
    assert_no_container(job_label, result.rollout_name)


def test_cli_claude_without_its_key_fails_before_any_container(tmp_path, job_label):
    env = {k: v for k, v in os.environ.items()
           if k not in ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN",
                        "BENCHFLOW_PROVIDER_API_KEY")}
    job = f"{job_label}-nokey"
    done = cli("run", str(ANSWER), "-a", "claude", "-m", "x", "--jobs-dir",
               str(tmp_path / "jobs"), "--job-name", job, env=env, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "ANTHROPIC_API_KEY" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "jobs" / job).exists()
    started = docker.from_env().containers.list(all=True,
                                                filters={"label": f"{LABEL_JOB}={job}"})
    assert not started


# -- failures --------------------------------------------------------------------------


async def test_crash_is_agent_execution_failed_and_skips_the_verifier(tmp_path, job_label):
    path = script(tmp_path, [
        {"actions": [WRITE_42, {"type": "message", "text": "turn 0 done"}]},
        {"actions": [{"type": "stderr", "text": "out of cheese"},
                     {"type": "crash", "exit_code": 3}]},
    ])
    scene = Scene(roles=[Role(name="agent", agent="scripted", model=str(path))],
                  turns=[Turn(role="agent"), Turn(role="agent", prompt="again")])
    result, paths = await run_rollout(ANSWER, [scene], tmp_path, job_label)

    assert result.error is not None
    assert (result.error.type, result.error.phase) == ("agent_execution_failed",
                                                        "agent_execution")
    assert result.reward is None and result.rewards is None
    assert result.durations.verifier_sec is None  # answer.txt was right, yet no verify ran
    assert (result.n_prompts, result.n_tool_calls) == (1, 1)  # the answered prompt
    assert paths.error.exists()
    events = events_of(paths.trajectory)
    (error,) = errors(events)
    assert (error.role, error.turn, error.exit_code) == ("agent", 1, 3)
    assert "out of cheese" in (error.stderr_tail or "")
    assert error.seq == events[-1].seq


def said(paths: RolloutPaths, kind: str) -> int:
    """How many events of `kind` the trajectory holds so far (read while it is written)."""
    path = paths.trajectory
    return path.read_text().count(f'"type":"{kind}"') if path.exists() else 0


async def run_with_jumps(task: Path, scenes: list[Scene], jobs_dir: Path, job: str,
                         jumps: Callable[[RolloutPaths], Awaitable[None]]
                         ) -> tuple[RolloutResult, RolloutPaths]:
    """`run_rollout`, while `jumps` moves the clock once the agent is where it wants it."""
    rollout = Rollout(RolloutConfig(task_path=task, scenes=scenes, jobs_dir=jobs_dir,
                                    job_name=job))
    box: dict[str, RolloutResult] = {}

    async def run() -> None:
        box["result"] = await rollout.run()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await jumps(rollout.paths)
        await wait_until(lambda: "result" in box, "the rollout's end", within_sec=300)
    check_result_file(box["result"], rollout.paths)
    assert_no_container(job, box["result"].rollout_name)
    return box["result"], rollout.paths


async def test_hang_hits_the_idle_timeout(tmp_path, job_label):
    path = script(tmp_path, [{"actions": [{"type": "message", "text": "thinking"},
                                          {"type": "hang"}]}])

    async def jumps(paths: RolloutPaths) -> None:
        await wait_until(lambda: said(paths, "agent_message"), "the agent's message",
                         within_sec=600)
        advance(30)  # then nothing more for the idle limit

    result, paths = await run_with_jumps(ANSWER, single(path, idle_timeout_sec=30), tmp_path,
                                         job_label, jumps)
    assert result.error is not None and result.error.type == "agent_execution_timeout"
    assert result.reward is None and result.durations.verifier_sec is None
    assert result.durations.agent_execution_sec is not None
    (error,) = errors(events_of(paths.trajectory))
    assert "sent nothing for 30 s" in error.message
    assert error.cancel_sent is True and error.stop_reason == "cancelled"
    assert (error.scene, error.role, error.turn) == ("main", "agent", 0)


async def test_wall_timeout_sends_session_cancel_and_records_it(tmp_path, job_label):
    # a chunk every 10 ms, and the clock jumps less than the idle limit between chunks:
    # the agent is never idle; only the role's wall clock (60 s) fires, inside the task's
    # 120 s phase budget
    path = script(tmp_path, [{"actions": [
        {"type": "slow_stream", "count": 100_000, "interval": 0.01, "text": "."}]}])

    async def jumps(paths: RolloutPaths) -> None:
        for _ in range(5):  # 5 x 13 s > 60 s, never 30 s without a chunk
            seen = said(paths, "agent_message")
            await wait_until(lambda: said(paths, "agent_message") > seen, "a new chunk",
                             within_sec=600)
            advance(13)

    result, paths = await run_with_jumps(
        ANSWER, single(path, timeout_sec=60, idle_timeout_sec=30), tmp_path, job_label, jumps)
    assert result.error is not None and result.error.type == "agent_execution_timeout"
    assert "wall-clock timeout of 60 s" in result.error.message
    assert result.reward is None and result.durations.verifier_sec is None
    assert result.durations.agent_execution_sec is not None
    events = events_of(paths.trajectory)
    (error,) = errors(events)
    assert error.cancel_sent is True  # session/cancel went out...
    assert error.stop_reason == "cancelled"  # ...and the agent ended its turn on it
    assert (error.scene, error.role, error.turn) == ("main", "agent", 0)
    streamed = messages(events)
    assert 1 <= len(streamed) < 100 and set(streamed) == {"."}  # streaming until cut off


# -- volume ----------------------------------------------------------------------------


async def test_a_five_megabyte_line(tmp_path, job_label):
    path = script(tmp_path, [{"actions": [{"type": "huge_message", "bytes": 5_000_000},
                                          {"type": "message", "text": "!"}, WRITE_42]}])
    result, paths = await run_rollout(ANSWER, single(path), tmp_path, job_label)

    assert result.error is None, result.error
    assert (result.reward, result.n_prompts, result.n_tool_calls) == (1.0, 1, 1)
    with paths.trajectory.open("rb") as fh:
        assert max(len(line) for line in fh) > 5_000_000  # one event, one line
    merged = [e for e in load(paths.trajectory) if isinstance(e, AgentMessageEvent)]
    assert [(len(e.text), e.chunks) for e in merged] == [(5_000_001, 2)]
    assert merged[0].text.endswith("y!")


async def test_ten_thousand_updates_in_one_turn_all_recorded_in_order(tmp_path, job_label):
    path = script(tmp_path, [{"actions": [
        {"type": "stream", "count": 10_000, "text": "u", "numbered": True}, WRITE_42]}])
    result, paths = await run_rollout(ANSWER, single(path), tmp_path, job_label)

    assert result.error is None, result.error
    assert (result.reward, result.n_prompts, result.n_tool_calls) == (1.0, 1, 1)
    events = events_of(paths.trajectory)
    chunks = [e for e in events if isinstance(e, AgentMessageEvent)]
    assert [e.text for e in chunks] == [f"u{i}\n" for i in range(10_000)]
    assert all((e.role, e.turn) == ("agent", 0) for e in chunks)
    merged = [e for e in load(paths.trajectory) if isinstance(e, AgentMessageEvent)]
    assert len(merged) == 1 and merged[0].chunks == 10_000
    assert merged[0].text == "".join(f"u{i}\n" for i in range(10_000))
