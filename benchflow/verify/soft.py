"""Soft verify: score the sandbox between rounds of a user loop without disturbing it.

The same verifier in the same fixed environment as the final verify, but none of the
destructive hardening: the agent's processes keep running and nothing it wrote is
restored or removed. The verifier folder is uploaded fresh and sealed, /logs/verifier is
emptied first so the rewards are this run's, and every verifier failure becomes an
`error_type` in the result instead of an exception: the scripted user decides what to do.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path

import anyio

from benchflow.errors import ErrorType, VerifierError
from benchflow.sandbox.base import Sandbox
from benchflow.task.models import HardeningConfig
from benchflow.verify._scripts import SYSTEM_PATH
from benchflow.verify.baseline import Baseline
from benchflow.verify.hardening import seal_argv
from benchflow.verify.rewards import read_rewards
from benchflow.verify.runner import VERIFIER_LOGS, VerifierRun, run_test_script
from benchflow.verify.verifier_env import verifier_env


@dataclasses.dataclass(frozen=True)
class SoftVerifyResult:
    """One soft verify: rewards, or the error type that prevented them, and test.sh's output."""

    rewards: dict[str, float] | None
    error_type: ErrorType | None
    output: str
    message: str | None = None

    @property
    def reward(self) -> float | None:
        return None if self.rewards is None else self.rewards.get("reward")


async def soft_verify(sandbox: Sandbox, run: VerifierRun, *, config: HardeningConfig,
                      baseline: Baseline | None = None, workspace: str | None = None,
                      pytest_plugins: Sequence[str] = (), out_dir: Path | None = None,
                      strict: bool = False) -> SoftVerifyResult:
    """Run test.sh once in the hardened verifier environment; never kill, restore or remove.

    `out_dir` keeps test.sh's stdout/stderr (a temporary folder when None). The verifier
    folder stays uploaded and root-only afterwards (with `lock_verifier_dirs`).

    Raises:
        VerifierError and its subclasses: only with `strict` (a step of a multi-step task,
            whose verifier failure ends the rollout); otherwise they are the result's
            `error_type`.
    """
    ws = (baseline.workspace if baseline else None) or workspace or run.cwd
    env = verifier_env(workspace=ws, verifier_dir=run.mount, task_env=run.env,
                       pytest_plugins=pytest_plugins, config=config, baseline=baseline)
    with tempfile.TemporaryDirectory(prefix="bf-soft-") as tmp:
        out = out_dir or Path(tmp) / "out"
        output = ""
        try:
            await sandbox.exec(["sh", "-c", 'rm -rf -- "$1"', "sh", run.mount], user="root",
                               env={"PATH": SYSTEM_PATH}, timeout=60)
            await sandbox.upload(run.verifier_dir, run.mount)
            try:
                result = await run_test_script(
                    sandbox, dataclasses.replace(run, env=env), out,
                    logs_mode="755" if config.lock_verifier_dirs else "777",
                    before=[seal_argv(run.mount, lock=config.lock_verifier_dirs)])
            finally:
                if (out / "stdout.txt").exists():
                    output = ((out / "stdout.txt").read_bytes()
                              + (out / "stderr.txt").read_bytes()).decode("utf-8", "replace")
            output = result.text()
            logs = Path(tmp) / "logs"
            await sandbox.download(VERIFIER_LOGS, logs)
            rewards = await anyio.to_thread.run_sync(read_rewards, logs)
        except VerifierError as exc:
            if strict:
                raise
            return SoftVerifyResult(None, exc.error_type, output, exc.message)
    return SoftVerifyResult(rewards, None, output)


__all__ = ["SoftVerifyResult", "soft_verify"]
