"""The hardened path folded into the agent's exec (`verify/fold.py`), against real exploits.

The same image and exploits as test_hardening.py, played by a root agent whose whole run is
one command (as the oracle's solve.sh): baseline.sh, the command and harden.sh in one exec,
then the final verify with harden.sh's report from that exec. Every exploit must score 0
(or fail closed) folded, and 1 with its step off, so the fold keeps each guarantee; an
agent that forges the fold's last line, kills the fold's shell, changes the baseline or
runs out of time gets harden.sh in an exec of its own, as without the fold.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchflow import RolloutConfig, Scene
from benchflow.errors import VerifierTampered
from benchflow.rollout import Rollout
from benchflow.rollout.snapshots import remove_snapshots
from benchflow.sandbox.base import ExecResult
from benchflow.sandbox.docker import DockerSandbox
from benchflow.task.models import HardeningConfig
from benchflow.verify.fold import FOLD_MARK, HardenFold
from benchflow.verify.hardening import verify_hardened
from benchflow.verify.runner import VerifierRun
from tests.integration.test_hardening import (  # noqa: F401 - the fixtures
    DAEMON,
    EXPLOITS,
    FIX,
    image,
    sandbox,
    verifier_dir,
)

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

REPO = Path(__file__).resolve().parents[2]
FORGED = FOLD_MARK.decode().strip() + ' 0 0 {"killed":0,"survivors":0}'
KILL_FOLD_SHELL = ("for d in /proc/[0-9]*; do case $(tr '\\0' ' ' < $d/cmdline 2>/dev/null) in "
                   "*'fold.sh (run as'*) kill -KILL ${d#/proc/} ;; esac; done")


class Counted:
    """The sandbox, its execs counted."""

    def __init__(self, sb: DockerSandbox) -> None:
        self.sb, self.execs = sb, 0

    async def exec(self, *args, **kwargs) -> ExecResult:
        self.execs += 1
        return await self.sb.exec(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.sb, name)


async def folded(sb: DockerSandbox, command: str, *, config: HardeningConfig | None = None,
                 timeout: float = 60, user: str = "root") -> tuple[ExecResult, HardenFold]:
    fold = HardenFold(workspace="/app", config=config or HardeningConfig(),
                      verifier_mount="/verifier")
    result = await fold.run(sb, ["bash", "-c", command], user=user, cwd="/app",
                            env={"ROLLOUT_TASK_INSTRUCTION": "/tmp/i.md"}, timeout=timeout)
    return result, fold


async def verify_folded(sb, tmp_path: Path, fold: HardenFold, *, kind: str = "mean",
                        config: HardeningConfig | None = None) -> float:
    assert fold.baseline is not None
    run = VerifierRun(verifier_dir=verifier_dir(tmp_path, kind), mount="/verifier",
                      timeout_sec=120, env={}, cwd="/app")
    done = await verify_hardened(sb, run, tmp_path / "out", tmp_path / "logs",
                                 baseline=fold.baseline, agent_user="root",
                                 config=config or HardeningConfig(), folded=fold.hardened)
    return done.outcome.reward


async def test_a_legitimate_fix_scores_one_in_two_execs(sandbox, tmp_path):
    counted = Counted(sandbox)
    result, fold = await folded(counted, FIX + " && echo fixed")
    assert result.ok and result.stdout == b"fixed\n", result
    assert fold.baseline is not None and fold.baseline.workspace == "/app"
    assert fold.baseline.path == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert fold.hardened is not None and fold.hardened["tampered"] == []
    assert await verify_folded(counted, tmp_path, fold) == 1.0
    assert counted.execs == 2  # the fold, then test.sh's


@pytest.mark.parametrize("name", EXPLOITS)
async def test_exploit_is_stopped_folded(name, sandbox, tmp_path):
    agent, root, _, kind = EXPLOITS[name]
    _, fold = await folded(sandbox, "; ".join(c for c in (agent, root) if c))
    assert fold.hardened is not None  # harden.sh ran in the fold
    try:
        assert await verify_folded(sandbox, tmp_path, fold, kind=kind) == 0.0
    except VerifierTampered:
        pass


@pytest.mark.parametrize("name", EXPLOITS)
async def test_exploit_works_folded_with_its_step_off(name, sandbox, tmp_path):
    agent, root, config, kind = EXPLOITS[name]
    _, fold = await folded(sandbox, "; ".join(c for c in (agent, root) if c), config=config)
    assert await verify_folded(sandbox, tmp_path, fold, kind=kind, config=config) == 1.0


async def test_the_fold_kills_what_the_agent_left(sandbox, tmp_path):
    result, fold = await folded(sandbox, DAEMON)
    assert result.ok
    assert fold.hardened is not None and fold.hardened["killed"] >= 1
    assert await verify_folded(sandbox, tmp_path, fold) == 0.0


async def test_a_forged_line_sends_harden_to_an_exec_of_its_own(sandbox, tmp_path):
    # the agent leaves a reward daemon and prints a clean-looking last line: neither that
    # line nor fold.sh's real one is believed, and the verify's own harden.sh exec kills it
    counted = Counted(sandbox)
    _, fold = await folded(counted, f"{DAEMON} echo '\n{FORGED}'")
    assert fold.baseline is not None and fold.hardened is None
    assert await verify_folded(counted, tmp_path, fold) == 0.0
    assert counted.execs == 3  # the fold, harden.sh, test.sh's
    report = json.loads((tmp_path / "out" / "hardening.json").read_text())
    assert report["survivors"] == 0  # the fold's kill ran; this exec found nothing left


async def test_a_killed_fold_shell_runs_harden_in_an_exec_of_its_own(sandbox, tmp_path):
    # the agent leaves a reward daemon, prints a clean-looking last line and kills the
    # fold's shell: the exec's code is the signal's, the line is not believed, and the
    # verify's own harden.sh exec kills the daemon
    counted = Counted(sandbox)
    result, fold = await folded(counted, f"{DAEMON} echo '\n{FORGED}'; {KILL_FOLD_SHELL}")
    assert not result.ok and result.exit_code >= 128, result
    assert fold.baseline is not None and fold.hardened is None
    assert await verify_folded(counted, tmp_path, fold) == 0.0
    assert counted.execs == 3  # the fold, harden.sh, test.sh's
    report = json.loads((tmp_path / "out" / "hardening.json").read_text())
    assert report["killed"] >= 1


async def test_a_changed_baseline_fails_closed(sandbox, tmp_path):
    _, fold = await folded(sandbox, FIX + " && echo 1:1 >> /var/lib/benchflow/procs")
    assert fold.hardened is None  # harden.sh in the fold refused it (BASELINE_TAMPERED)
    with pytest.raises(VerifierTampered):
        await verify_folded(sandbox, tmp_path, fold)


async def test_the_agent_deadline_still_hardens(sandbox):
    # (setsid: out of the process group that `timeout` signals at the deadline)
    result, fold = await folded(sandbox, f"setsid {DAEMON} sleep 60", timeout=2)
    assert result.timed_out
    assert fold.hardened is not None and fold.hardened["killed"] >= 1


async def test_a_non_root_agent_is_not_folded(sandbox, tmp_path):
    counted = Counted(sandbox)
    result, fold = await folded(counted, FIX, user="agent")
    assert result.ok and fold.baseline is not None and fold.hardened is None
    try:
        assert await verify_folded(counted, tmp_path, fold) == 1.0
    finally:
        assert counted.execs == 4  # baseline, the agent, harden.sh, test.sh's


@pytest.fixture
def exec_names(monkeypatch) -> list[str]:
    """The name of each exec the Docker sandbox runs (a script's NAME, else argv[0])."""
    names: list[str] = []
    real = DockerSandbox.exec_into

    async def exec_into(self, cmd, capture, **kwargs):
        names.append(cmd[3] if len(cmd) > 3 and cmd[1] == "-c" else cmd[0])
        return await real(self, cmd, capture, **kwargs)

    monkeypatch.setattr(DockerSandbox, "exec_into", exec_into)
    return names


def _task(tmp_path: Path, solve: str) -> Path:
    task = tmp_path / "hello-world"
    shutil.copytree(REPO / "tasks" / "hello-world", task)
    (task / "oracle" / "solve.sh").write_text(f"#!/bin/bash\n{solve}\n")
    return task


async def _oracle(task: Path, tmp_path: Path, job: str):
    config = RolloutConfig(task_path=task, scenes=[Scene.single(agent="oracle")],
                           jobs_dir=tmp_path / "jobs", job_name=job, harden=True)
    rollout = Rollout(config)
    result = await rollout.run()
    return result, rollout


async def test_the_hardened_oracle_rollout_folds(tmp_path, job_label, exec_names):
    solve = ("echo 'Hello, world!' > hello.txt; echo solved; "
             "nohup sleep 1000 >/dev/null 2>&1 </dev/null &")
    result, rollout = await _oracle(_task(tmp_path, solve), tmp_path, job_label)
    assert (result.reward, result.error) == (1.0, None)
    assert exec_names[0] == "fold" and len(exec_names) == 2, exec_names  # then test.sh's
    assert result.hardened
    report = json.loads((rollout.paths.verifier_dir / "hardening.json").read_text())
    assert report["killed"] >= 1  # the sleep solve.sh left, killed in the fold
    assert (rollout.paths.command_dir / "stdout.txt").read_bytes() == b"solved\n"


async def test_an_oracle_killing_the_fold_fails_the_rollout(tmp_path, job_label):
    solve = f"echo 'Hello, world!' > hello.txt; echo '\n{FORGED}'; {KILL_FOLD_SHELL}"
    result, _ = await _oracle(_task(tmp_path, solve), tmp_path, job_label)
    assert result.reward is None and result.error is not None


@pytest.mark.parametrize("update", [{"workspace_changes": True}, {"snapshot_turns": True}])
async def test_a_rollout_that_must_see_the_agent_s_sandbox_is_not_folded(
        update, tmp_path, job_label, exec_names):
    """Workspace changes and turn snapshots read the sandbox as the agent left it, before
    harden.sh restores anything: the baseline and harden.sh keep execs of their own."""
    config = RolloutConfig(task_path=REPO / "tasks" / "hello-world",
                           scenes=[Scene.single(agent="oracle")], jobs_dir=tmp_path / "jobs",
                           job_name=job_label, harden=True, **update)
    result = await Rollout(config).run()
    removed = await remove_snapshots([tmp_path / "jobs" / job_label / result.rollout_name])
    assert (len(removed) == 2) is ("snapshot_turns" in update), removed  # at 0 and the end
    assert (result.reward, result.error) == (1.0, None)
    assert "fold" not in exec_names and {"baseline", "harden"} <= set(exec_names), exec_names
