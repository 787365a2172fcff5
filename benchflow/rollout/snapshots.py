"""Snapshots of a rollout's sandbox at each turn boundary (`snapshot_turns`), for forking
a finished rollout at a turn (`rollout/fork.py`) and regrading its final workspace.

Before each turn (step) and once after the last one, the running sandbox is saved through
its backend's snapshot API (`SnapshotSandbox.save_snapshot`: Docker commits a local image,
Modal snapshots the filesystem). The rollout folder's `snapshots.json` lists them with the
hardening baseline, so a later rollout can start from any of them. They belong to the job:
`benchflow jobs rm JOB_DIR` removes them with it (unless `--keep-snapshots`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from pathlib import Path
from typing import Any

from pydantic import Field

from benchflow._models import StrictModel
from benchflow.errors import ConfigError, SandboxError
from benchflow.rollout.result import write_json_atomic
from benchflow.sandbox.base import Sandbox, SnapshotSandbox
from benchflow.verify.baseline import Baseline

log = logging.getLogger(__name__)

SNAPSHOTS_FILE = "snapshots.json"
SNAPSHOT_REPOSITORY = "benchflow-turns"


class TurnSnapshot(StrictModel):
    """The sandbox as it was before step `step` (the rollout's steps in order; `step` equal
    to the number of steps: after the last one)."""

    step: int = Field(ge=0)
    scene: str | None = None
    turn: int | None = Field(default=None, description="the turn's index in its scene")
    name: str


class TurnSnapshots(StrictModel):
    """A rollout's `snapshots.json`."""

    schema_version: int = 1
    backend: str
    provider_config: dict[str, Any] = Field(default_factory=dict)
    n_steps: int = 0
    baseline: Baseline | None = Field(
        default=None, description="the hardening baseline taken before the first turn (it "
        "is inside every snapshot; a fork or regrade checks against it)")
    snapshots: list[TurnSnapshot] = Field(default_factory=list)

    def at(self, step: int) -> TurnSnapshot | None:
        return next((s for s in self.snapshots if s.step == step), None)

    @property
    def final(self) -> TurnSnapshot | None:
        """The snapshot after the last step (what the verifier saw, before hardening)."""
        return self.at(self.n_steps) if self.n_steps else None


def snapshot_name(job_name: str, rollout_name: str, step: int, *, final: bool = False) -> str:
    """`benchflow-turns/<job>:<rollout hash>-<step | end>`: a valid image reference."""
    job = re.sub(r"[^a-z0-9_.-]+", "-", job_name.lower()).strip(".-")[:80] or "job"
    digest = hashlib.sha256(f"{job_name}\0{rollout_name}".encode()).hexdigest()[:16]
    return f"{SNAPSHOT_REPOSITORY}/{job}:{digest}-{'end' if final else step}"


def read_snapshots(rollout_dir: Path) -> TurnSnapshots | None:
    """The rollout's `snapshots.json` (None when it has none)."""
    path = rollout_dir / SNAPSHOTS_FILE
    if not path.is_file():
        return None
    try:
        return TurnSnapshots.model_validate_json(path.read_text())
    except ValueError as exc:
        raise ConfigError(f"{path}: not a valid snapshots file ({exc})") from None


class TurnSnapshotter:
    """Takes a rollout's turn snapshots and keeps its `snapshots.json` current."""

    def __init__(self, sandbox: Sandbox, folder: Path, *, job_name: str, rollout_name: str,
                 n_steps: int, backend: str, provider_config: dict[str, Any]) -> None:
        self.sandbox = sandbox
        self.path = folder / SNAPSHOTS_FILE
        self.job_name, self.rollout_name = job_name, rollout_name
        self.record = TurnSnapshots(backend=backend, provider_config=provider_config,
                                    n_steps=n_steps)

    @staticmethod
    def check(sandbox: Sandbox) -> None:
        """Raises ConfigError when the backend cannot snapshot a running sandbox."""
        if not sandbox.capabilities.snapshots or not isinstance(sandbox, SnapshotSandbox):
            raise ConfigError(f"--snapshot-turns: the {sandbox.backend} sandbox backend cannot "
                              "snapshot a running sandbox; use docker or modal")

    def set_baseline(self, baseline: Baseline | None) -> None:
        self.record = self.record.model_copy(update={"baseline": baseline})

    async def take(self, step: int, scene: str | None = None, turn: int | None = None) -> None:
        """Snapshot the sandbox as it is now, before step `step` (or after the last)."""
        assert isinstance(self.sandbox, SnapshotSandbox)
        final = step >= self.record.n_steps
        name = snapshot_name(self.job_name, self.rollout_name, step, final=final)
        try:
            await self.sandbox.save_snapshot(
                name, f"benchflow: {self.rollout_name} before step {step}" if not final
                else f"benchflow: {self.rollout_name} after its last step")
        except SandboxError as exc:
            log.warning("could not snapshot the sandbox before step %s: %s", step, exc)
            return
        snaps = [s for s in self.record.snapshots if s.step != step]
        snaps.append(TurnSnapshot(step=step, scene=scene, turn=turn, name=name))
        self.record = self.record.model_copy(update={"snapshots": sorted(
            snaps, key=lambda s: s.step)})
        write_json_atomic(self.path, self.record.model_dump_json(indent=2))


async def remove_snapshots(rollout_dirs: list[Path]) -> list[str]:
    """Delete the turn snapshots the rollouts' `snapshots.json` list (through their backend's
    provider); returns the names removed."""
    from benchflow.sandbox.registry import get_provider

    removed: list[str] = []
    for folder in rollout_dirs:
        record = read_snapshots(folder)
        if record is None or not record.snapshots:
            continue
        provider = get_provider(record.backend, record.provider_config)
        removed += await provider.remove_snapshots([s.name for s in record.snapshots])
    return removed


__all__ = ["SNAPSHOTS_FILE", "TurnSnapshot", "TurnSnapshots", "TurnSnapshotter",
           "read_snapshots", "remove_snapshots", "snapshot_name"]
