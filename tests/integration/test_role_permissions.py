"""Role permissions the OS enforces, through a whole rollout with the scripted agent.

Three roles share the sandbox: a coder and a tester (read-write) and a reviewer
(read-only, `outputs: [review.md]`). Every write goes through each path an agent has:
its own process (`via: local`), the client's fs/write_text_file, and a terminal command.
What the reviewer may not write fails with EACCES (Permission denied) and does not
exist afterwards; what it may write (its output, its scratch folder) works; the two
read-write roles edit each other's files (shared group, umask 002); nobody reads /oracle.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from benchflow import Role, Rollout, RolloutConfig, Scene, Turn
from benchflow.trajectory import AgentMessageEvent, ToolCallUpdateEvent

from .conftest import TASKS
from .test_scenes import assert_no_container, check_result_file, events_of

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

CODER_REVIEWER = TASKS / "coder-reviewer"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def sh(command: str) -> dict[str, str]:
    return {"type": "shell", "command": command}


def outputs(events: list, role: str) -> list[str]:
    out = []
    for e in events:
        if isinstance(e, ToolCallUpdateEvent) and e.role == role:
            raw = e.update.get("rawOutput")
            if isinstance(raw, dict) and "output" in raw:
                out.append(str(raw["output"]))
    return out


def said(events: list, role: str) -> list[str]:
    return [e.text for e in events if isinstance(e, AgentMessageEvent) and e.role == role]


def permissions_script(folder: Path) -> Path:
    path = folder / "script.yaml"
    path.write_text(yaml.safe_dump({"roles": {
        "coder": {"turns": [
            {"actions": [
                {"type": "write_file", "path": "app.py", "content": "x = 1\n", "via": "local"},
                sh("mkdir -p pkg && echo 'y = 2' > pkg/mod.py && id -un")]},
            {"actions": [
                sh("echo 'z = 3' >> pkg/tested.py && cat pkg/tested.py && cat review.md"),
                sh("ls -a /app | tr '\\n' ' '")]}]},
        "tester": {"turns": [
            {"actions": [
                # the coder's files, written by its process and by a terminal: editable
                sh("echo 'x = 10' >> app.py && echo 'y = 20' >> pkg/mod.py && echo edited"),
                {"type": "write_file", "path": "pkg/tested.py", "content": "t = 1\n"},
                sh("id -un")]}]},
        "reviewer": {"turns": [
            {"actions": [
                sh("id -un; cat app.py; touch /app/x; echo rc=$?"),
                {"type": "write_file", "path": "/app/y.txt", "content": "no", "via": "local"},
                {"type": "write_file", "path": "/app/pkg/z.txt", "content": "no"},
                sh("echo 'x = 0' >> app.py; echo rc=$?"),
                {"type": "write_file", "path": "review.md", "content": "LGTM\n"},
                sh("echo note > /tmp/roles/reviewer/n && cat /tmp/roles/reviewer/n"),
                sh("ls /tmp/roles/coder; echo rc=$?")]}]},
    }}))
    return path


async def test_a_read_only_reviewer_writes_only_its_output_and_scratch(tmp_path, job_label):
    script = str(permissions_script(tmp_path))
    scene = Scene(name="review", roles=[
        Role(name="coder", agent="scripted", model=script),
        Role(name="tester", agent="scripted", model=script),
        Role(name="reviewer", agent="scripted", model=script, workspace="read-only",
             outputs=["review.md"])],
        turns=[Turn(role="coder"), Turn(role="tester", prompt="t"),
               Turn(role="reviewer", prompt="r"), Turn(role="coder", prompt="c")])
    rollout = Rollout(RolloutConfig(task_path=CODER_REVIEWER, scenes=[scene],
                                    jobs_dir=tmp_path, job_name=job_label,
                                    verifier_disabled=True))
    result = await rollout.run()
    assert result.error is None, result.error
    check_result_file(result, rollout.paths)
    assert_no_container(job_label, result.rollout_name)
    events = events_of(rollout.paths.trajectory)

    # each role its own user
    coder, tester, reviewer = (outputs(events, r) for r in ("coder", "tester", "reviewer"))
    assert coder[0].strip() == "agent-coder" and tester[-1].strip() == "agent-tester"
    assert reviewer[0].startswith("agent-reviewer\n")
    assert "x = 1\nx = 10\n" in reviewer[0]  # it reads what the others wrote
    # the reviewer reads everything but writes nothing in the workspace: EACCES each way
    # (a command's stderr and stdout may come in either order)
    assert "Permission denied" in reviewer[0] and "rc=1" in reviewer[0].splitlines()
    assert "Permission denied" in reviewer[1] and "rc=2" in reviewer[1].splitlines()
    failed_writes = [t for t in said(events, "reviewer") if t.startswith("write failed")]
    assert len(failed_writes) == 2, said(events, "reviewer")
    assert all("Permission denied" in t or "EACCES" in t or "denied" in t.lower()
               for t in failed_writes), failed_writes
    # ...except its declared output and its scratch folder
    assert reviewer[2].strip() == "note"
    # another role's scratch folder is closed to it
    assert "Permission denied" in reviewer[3] and "rc=2" in reviewer[3].splitlines()
    # the read-write roles edit each other's files (the agent's own writes and terminals)
    assert tester[0].strip() == "edited"
    assert coder[1].splitlines() == ["t = 1", "z = 3", "LGTM"]
    listing = coder[2].split()
    assert "x" not in listing and "y.txt" not in listing
    assert {"app.py", "pkg", "review.md"} <= set(listing)


async def test_no_agent_role_reads_the_oracle_solution(tmp_path, job_label):
    """The oracle (root) runs the solution; a scripted role beside it cannot read it."""
    script = tmp_path / "reader.yaml"
    script.write_text(yaml.safe_dump({"roles": {"reader": {"turns": [{"actions": [
        sh("id -un; cat /solution/solve.sh; echo rc=$?; ls /oracle; echo rc=$?")]}]}}}))
    scene = Scene(roles=[Role(name="solver", agent="oracle"),
                         Role(name="reader", agent="scripted", model=str(script),
                              workspace="read-only")],
                  turns=[Turn(role="solver"), Turn(role="reader", prompt="look")])
    rollout = Rollout(RolloutConfig(task_path=CODER_REVIEWER, scenes=[scene],
                                    jobs_dir=tmp_path, job_name=job_label))
    result = await rollout.run()
    assert result.error is None, result.error
    assert result.reward == 1.0  # the oracle's solution ran
    (out,) = outputs(events_of(rollout.paths.trajectory, agents=["oracle", "scripted"]),
                     "reader")
    lines = out.splitlines()
    assert lines[0] == "agent-reader"
    assert "Permission denied" in out and "rc=1" in lines and "rc=2" in lines
    assert "fizzbuzz" not in out  # nothing of solve.sh
