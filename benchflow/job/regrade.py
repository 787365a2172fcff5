"""`benchflow jobs regrade`: score a finished job's final workspaces again, with the task's
current verifier (or another task folder's), beside the old rewards, never over them.

Every rollout run with `--snapshot-turns` has a snapshot of its sandbox after its last
turn (before hardening). Regrading starts a sandbox from it (a fork at the end: no turn
runs, `rollout/fork.py`), hardens it against the original's baseline and runs the
verifier. The new result goes to `<rollout>/regrades/<time>/result.json` (with the
verifier's output beside it) and one line in `<rollout>/regrades.jsonl`; the rollout's
own result.json is left as it was.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from benchflow.config import ForkSource, RolloutConfig
from benchflow.errors import ConfigError
from benchflow.job.store import RESULT
from benchflow.rollout.result import RolloutResult, utcnow, write_json_atomic
from benchflow.rollout.snapshots import read_snapshots

REGRADES_DIR = "regrades"
REGRADES_LOG = "regrades.jsonl"


@dataclass(frozen=True)
class Regrade:
    """One rollout scored again (or skipped: `skipped` says why)."""

    rollout: str
    old_reward: float | None
    new: RolloutResult | None = None
    skipped: str | None = None


@dataclass(frozen=True)
class RegradeTarget:
    folder: Path
    result: RolloutResult
    config: RolloutConfig


def plan_regrade(job_dir: Path, task_dir: Path | None = None
                 ) -> tuple[list[RegradeTarget], list[Regrade]]:
    """The job's rollouts that can be regraded, and those that cannot (with why).

    Raises:
        ConfigError: not a job folder, `task_dir` is not a task, or no rollout has a final
            snapshot.
    """
    if not job_dir.is_dir():
        raise ConfigError(f"{job_dir}: no such job folder")
    if task_dir is not None:
        from benchflow.task import load_task

        load_task(task_dir)  # a bad --task-dir fails before anything starts
    targets: list[RegradeTarget] = []
    skipped: list[Regrade] = []
    for path in sorted(job_dir.glob(f"*/*/*/{RESULT}")):
        folder = path.parent
        try:
            result = RolloutResult.model_validate_json(path.read_text())
            config = RolloutConfig.model_validate_json((folder / "config.json").read_text())
        except (OSError, ValueError):
            continue
        record = read_snapshots(folder)
        final = record.final if record is not None else None
        if final is None:
            skipped.append(Regrade(result.rollout_name, result.reward,
                                   skipped="no snapshot after its last turn"))
            continue
        config = config.model_copy(update={"fork": ForkSource(
            rollout=f"{result.job_name}/{result.rollout_name}", step=final.step,
            snapshot=final.name,
            baseline=record.baseline.model_dump(mode="json") if record and record.baseline
            else None)})
        targets.append(RegradeTarget(folder, result, config))
    if not targets:
        raise ConfigError(f"{job_dir}: no rollout has a snapshot of its final workspace to "
                          "regrade; run the job with --snapshot-turns (or "
                          "`snapshot_turns: true` in the job file)")
    return targets, skipped


async def regrade(target: RegradeTarget, task_dir: Path | None = None) -> Regrade:
    """Verify one rollout's final workspace again; write the new result beside the old."""
    from benchflow.rollout.rollout import Rollout

    stamp = datetime.now().strftime("%Y-%m-%d__%H-%M-%S-%f")
    with tempfile.TemporaryDirectory(prefix="benchflow-regrade-") as tmp:
        config = target.config.model_copy(update={
            "task_path": (task_dir or target.config.task_path).expanduser().resolve(),
            "jobs_dir": Path(tmp), "job_name": "regrade", "run_id": None,
            "snapshot_turns": False, "workspace_changes": False, "verifier_disabled": False,
            "preserve_env": "never"})
        rollout = Rollout(config)
        new = await rollout.run()
        out = target.folder / REGRADES_DIR / stamp
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / RESULT, new.model_dump_json(indent=2))
        if rollout.paths.verifier_dir.is_dir():
            shutil.copytree(rollout.paths.verifier_dir, out / "verifier")
    line = {"at": utcnow().isoformat(), "task_path": str(config.task_path),
            "task_git_commit_id": new.task_git_commit_id, "reward": new.reward,
            "rewards": new.rewards, "error": new.error.model_dump() if new.error else None,
            "old_reward": target.result.reward, "folder": f"{REGRADES_DIR}/{stamp}"}
    with (target.folder / REGRADES_LOG).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")
    return Regrade(target.result.rollout_name, target.result.reward, new=new)


async def regrade_job(job_dir: Path, task_dir: Path | None = None) -> list[Regrade]:
    """Regrade every rollout of the job that has a final snapshot (one at a time)."""
    targets, skipped = plan_regrade(job_dir, task_dir)
    return skipped + [await regrade(t, task_dir) for t in targets]


__all__ = ["REGRADES_DIR", "REGRADES_LOG", "Regrade", "plan_regrade", "regrade",
           "regrade_job"]
