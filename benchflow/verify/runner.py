"""Run a task's verifier in the sandbox and turn what it left into rewards.

test.sh is uploaded to the verifier folder (`/verifier` native, `/tests` legacy), made
executable and run directly from the working directory, never handed to pytest.
A non-zero exit is `verifier_failed` and any reward file is ignored.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from benchflow.errors import VerifierFailed, VerifierTimeout
from benchflow.sandbox.base import ExecResult, Sandbox
from benchflow.verify._scripts import after_chained, chained_argv
from benchflow.verify.rewards import read_rewards

log = logging.getLogger(__name__)

VERIFIER_LOGS = "/logs/verifier"


@dataclass(frozen=True)
class VerifierRun:
    """Where and how to run one verification."""

    verifier_dir: Path
    mount: str
    timeout_sec: float
    env: Mapping[str, str]
    cwd: str | None = None


@dataclass(frozen=True)
class VerifierOutcome:
    rewards: dict[str, float]
    exec_result: ExecResult

    @property
    def reward(self) -> float:
        return self.rewards["reward"]


async def upload_verifier(sandbox: Sandbox, run: VerifierRun) -> None:
    """Copy the task's verifier folder into the sandbox."""
    await sandbox.upload(run.verifier_dir, run.mount)


async def run_test_script(sandbox: Sandbox, run: VerifierRun, out_dir: Path, *,
                          reset_logs: bool = True, logs_mode: str = "755",
                          before: Sequence[Sequence[str]] = ()) -> ExecResult:
    """Execute test.sh as root with its timeout; keep stdout/stderr under `out_dir`.

    In the same exec, right before test.sh starts, /logs/verifier is emptied and recreated
    root-owned with `logs_mode` (hardening's `reset_verifier_logs=false` passes
    `reset_logs=False`; `lock_verifier_dirs=false` passes "777"). `before`: argvs (e.g.
    `hardening.seal_argv()`) run first in that exec, as root, each of which must succeed:
    one round trip to the sandbox instead of one more per command.

    Raises:
        VerifierError: a command of `before` failed (test.sh did not run).
        VerifierTimeout: test.sh ran past `timeout_sec`.
        VerifierFailed: test.sh exited non-zero.
    """
    script = f"{run.mount}/test.sh"
    # Reward files written before this moment never count.
    launch = (f'rm -rf {VERIFIER_LOGS} && mkdir -p {VERIFIER_LOGS} && chmod "$1" {VERIFIER_LOGS} '
              '&& chmod +x "$0" && exec "$0"')
    if not reset_logs:
        launch = 'chmod +x "$0" && exec "$0"'
    result = await sandbox.exec(chained_argv(before, ["sh", "-c", launch, script, logs_mode]),
                                user="root", cwd=run.cwd, env=dict(run.env),
                                timeout=run.timeout_sec)
    if before:
        result = after_chained(result, before, "test.sh")
    await anyio.to_thread.run_sync(_keep_output, out_dir, result)  # off the event loop
    if result.timed_out:
        raise VerifierTimeout("verifier", run.timeout_sec,
                              f"test.sh exceeded verifier timeout of {run.timeout_sec:g} s")
    if result.exit_code != 0:
        raise VerifierFailed(f"test.sh exited with code {result.exit_code} (any reward file is "
                             f"ignored); output tail:\n{result.text(1500)}")
    return result


def _keep_output(out_dir: Path, result: ExecResult) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "stdout.txt").write_bytes(result.stdout)
    (out_dir / "stderr.txt").write_bytes(result.stderr)


async def verify(sandbox: Sandbox, run: VerifierRun, logs_dir: Path) -> VerifierOutcome:
    """Upload, run, download `/logs` to `logs_dir` and parse the rewards.

    test.sh's stdout/stderr go to `logs_dir/verifier/`. When test.sh fails, `/logs` is not
    downloaded here: the rollout's cleanup collects it for every outcome.
    """
    await upload_verifier(sandbox, run)
    result = await run_test_script(sandbox, run, logs_dir / "verifier")
    await sandbox.download("/logs", logs_dir)
    rewards = await anyio.to_thread.run_sync(read_rewards, logs_dir / "verifier")
    return VerifierOutcome(rewards, result)
