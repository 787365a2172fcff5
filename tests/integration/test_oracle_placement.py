"""The oracle's solution placed by the sandbox's start (one upload, `SandboxSpec.trees`) ends
exactly as the install-time placement leaves it: same owner, modes, links and /solution link;
with any agent besides the built-in ones it is still placed at install."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from benchflow import RolloutConfig, Scene
from benchflow.agents.builtin import NopAgent, OracleAgent, solution_tree
from benchflow.rollout import Rollout
from benchflow.rollout import rollout as rollout_module
from benchflow.task import load_task

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

SOLVE = """#!/bin/bash
cd /oracle
stat -c '%n %u %g %a %F' /oracle /oracle/solve.sh /oracle/data /oracle/data/note.txt \
    /oracle/link /solution
readlink /solution /oracle/link
cat /solution/link
"""


def make_task(root: Path, user: str | None) -> Path:
    task = root / "task"
    (task / "environment").mkdir(parents=True)
    (task / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    agent = f"agent:\n  user: {user}\n" if user else ""
    (task / "task.md").write_text(f"---\nschema_version: '1.0'\n{agent}---\nDo it.\n")
    oracle = task / "oracle"
    (oracle / "data").mkdir(parents=True)
    (oracle / "solve.sh").write_text(SOLVE)
    (oracle / "solve.sh").chmod(0o755)
    (oracle / "data" / "note.txt").write_text("the note\n")
    (oracle / "data" / "note.txt").chmod(0o644)
    os.symlink("data/note.txt", oracle / "link")
    (task / "verifier").mkdir()
    (task / "verifier" / "test.sh").write_text("#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    return task


async def placed(task: Path, jobs: Path, job: str, agent: str = "oracle") -> str:
    config = RolloutConfig(task_path=task, scenes=[Scene.single(agent=agent)], jobs_dir=jobs,
                           job_name=job)
    rollout = Rollout(config)
    result = await rollout.run()
    assert (result.error, result.reward) == (None, 1.0), result.error
    return (rollout.paths.command_dir / "stdout.txt").read_text()


@pytest.mark.parametrize("user", [None, "nobody"])
async def test_start_placement_matches_install_placement(user, tmp_path, job_label,
                                                         monkeypatch):
    task = make_task(tmp_path, user)
    at_start = await placed(task, tmp_path / "a", job_label)
    monkeypatch.setattr(rollout_module, "solution_tree", lambda *a: None)  # the install path
    at_install = await placed(task, tmp_path / "b", job_label)
    assert at_start == at_install
    host = os.stat(task / "oracle")
    owner = "0 0" if user is None else f"{host.st_uid} {host.st_gid}"
    expected = ([f"/oracle {owner} 700 directory", f"/oracle/solve.sh {owner} 700 regular file",
                 f"/oracle/data {owner} 700 directory",
                 f"/oracle/data/note.txt {owner} 600 regular file"]
                if user is None else
                [f"/oracle {owner} 755 directory", f"/oracle/solve.sh {owner} 755 regular file",
                 f"/oracle/data {owner} 755 directory",
                 f"/oracle/data/note.txt {owner} 644 regular file"])
    lines = at_start.splitlines()
    assert lines[:4] == expected
    assert lines[4].startswith(f"/oracle/link {owner} ") and lines[4].endswith("symbolic link")
    assert lines[5].startswith("/solution 0 0 ") and lines[5].endswith("symbolic link")
    assert lines[6:] == ["/oracle", "data/note.txt", "the note"]


def test_only_builtin_agent_rollouts_place_the_solution_at_start(tmp_path):
    task = load_task(make_task(tmp_path, None))
    tree = solution_tree(task, [OracleAgent(), NopAgent()])
    assert tree is not None and (tree.src, tree.dst, tree.link, tree.root_only) == (
        task.solution_dir, "/oracle", "/solution", True)
    assert solution_tree(task, [NopAgent()]) is None  # no oracle: nothing to place
    assert solution_tree(task, [OracleAgent(), object()]) is None  # another agent: at install
