"""Fork a finished rollout at a turn boundary: same history, other agents from there on.

`benchflow fork ROLLOUT_DIR --at-turn N [--role NAME=AGENT[:MODEL]] [-k K]` needs a
rollout run with `--snapshot-turns`. Each fork is a new rollout (in a new job) that

1. starts its sandbox from the original's snapshot before turn N (the files exactly as
   they were; the agents as installed; the role users and permissions),
2. checks its verifier against the original's hardening baseline (taken before turn 0,
   and inside the snapshot), so nothing the earlier turns did escapes hardening,
3. runs turns N.. with the given role assignment, each role in a new session whose first
   prompt carries the role's earlier turns as text (`replay.py`: no agent here restores
   its ACP session from disk, so every role gets the same, documented summary),
4. verifies, and writes `result.json` with `parent: {rollout, turn}` (the original's
   `<job>/<rollout>` and N).

`plan_fork` checks every input before anything is written or started; its `ConfigError`
is the CLI's one-line exit 2. Forking at N equal to the number of turns runs no turn:
the final workspace is only verified again (`benchflow jobs regrade`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from benchflow.bounds import MAX_ATTEMPTS
from benchflow.config import ForkSource, RolloutConfig
from benchflow.errors import ConfigError
from benchflow.roles import RoleAgent, assign_roles
from benchflow.rollout.replay import histories
from benchflow.rollout.result import RolloutResult
from benchflow.rollout.snapshots import TurnSnapshot, read_snapshots
from benchflow.sandbox.base import Sandbox, SnapshotSandbox
from benchflow.steps import Step, assign_sessions, desugar
from benchflow.verify._scripts import run_script
from benchflow.verify.baseline import Baseline


@dataclass(frozen=True)
class ForkPlan:
    """The checked inputs of a fork: the configs of its K rollouts, in one new job."""

    original: RolloutResult
    snapshot: TurnSnapshot
    configs: list[RolloutConfig]

    @property
    def job_name(self) -> str:
        return self.configs[0].job_name or ""

    @property
    def jobs_dir(self) -> Path:
        return self.configs[0].jobs_dir


def _read(rollout_dir: Path) -> tuple[RolloutResult, RolloutConfig]:
    result_file, config_file = rollout_dir / "result.json", rollout_dir / "config.json"
    if not result_file.is_file() or not config_file.is_file():
        raise ConfigError(f"{rollout_dir}: not a finished rollout folder (no result.json and "
                          "config.json); give <jobs>/<job>/<agent>/<dataset>/<task>__<n>")
    try:
        result = RolloutResult.model_validate_json(result_file.read_text())
        config = RolloutConfig.model_validate_json(config_file.read_text())
    except ValueError as exc:
        first = str(exc).splitlines()[0]
        raise ConfigError(f"{rollout_dir}: cannot read its result.json/config.json ({first})"
                          ) from None
    return result, config


async def plan_fork(rollout_dir: Path, at_turn: int, roles: Mapping[str, RoleAgent], *,
                    jobs_dir: Path | None = None, job_name: str | None = None, k: int = 1,
                    snapshot_turns: bool = False) -> ForkPlan:
    """Check a fork's inputs and build its rollouts' configs; nothing is written.

    Raises:
        ConfigError: not a rollout folder, no snapshots, `at_turn` out of range, a role
            the rollout does not have, a bad `k`, or a snapshot that no longer exists.
    """
    rollout_dir = rollout_dir.expanduser()
    if not 1 <= k <= MAX_ATTEMPTS:
        raise ConfigError(f"-k {k}: give 1 to {MAX_ATTEMPTS:,} forks")
    original, config = _read(rollout_dir)
    record = read_snapshots(rollout_dir)
    if record is None or not record.snapshots:
        raise ConfigError(f"{rollout_dir}: no turn snapshots to fork from; run it with "
                          "--snapshot-turns (or `snapshot_turns: true` in the job file)")
    if not 0 <= at_turn <= record.n_steps:
        raise ConfigError(f"--at-turn {at_turn}: out of range; this rollout has turns 0.."
                          f"{record.n_steps - 1} (or {record.n_steps}: only verify again)")
    snapshot = record.at(at_turn)
    if snapshot is None:
        raise ConfigError(f"--at-turn {at_turn}: {rollout_dir} has no snapshot before that "
                          f"turn (it has: {', '.join(str(s.step) for s in record.snapshots)})")
    scenes = assign_roles(config.scenes, roles, source=str(rollout_dir))
    await _check_snapshot_exists(record.backend, record.provider_config, snapshot.name)
    steps = desugar(config.scenes, "")
    trajectory = rollout_dir / "trajectory" / "acp_trajectory.jsonl"
    wanted = _history_roles(steps, at_turn)
    same_agent = {r.name for s in scenes for r in s.roles} - {
        name for name, given in roles.items()
        if any(r.name == name and r.agent != given.agent for s in config.scenes
               for r in s.roles)}
    source = ForkSource(
        rollout=f"{original.job_name}/{original.rollout_name}", step=at_turn,
        snapshot=snapshot.name,
        baseline=record.baseline.model_dump(mode="json") if record.baseline else None,
        history=histories(trajectory, wanted),
        sessions=last_sessions(trajectory, [w for w in wanted if w[0] in same_agent]))
    stamp = datetime.now().strftime("%Y-%m-%d__%H-%M-%S")
    name = job_name or f"fork-{original.job_name}-t{at_turn}-{stamp}"
    base = config.model_copy(update={
        "scenes": scenes, "jobs_dir": (jobs_dir or config.jobs_dir).expanduser(),
        "job_name": name, "run_id": None, "fork": source, "snapshot_turns": snapshot_turns,
        "agent": None, "model": None, "attempt": 1})
    configs = [base.model_copy(update={"attempt": i + 1}) for i in range(k)]
    existing = configs[0].jobs_dir / name
    if existing.exists():
        raise ConfigError(f"{existing} exists already; choose another --job-name")
    return ForkPlan(original=original, snapshot=snapshot, configs=configs)


def last_sessions(trajectory: Path, roles: Sequence[tuple[str, str | None, int]]
                  ) -> dict[str, str]:
    """Each role's ACP session id at its last prompt before the fork (same scene)."""
    from benchflow.trajectory.events import UserMessageEvent
    from benchflow.trajectory.reader import iter_events

    if not trajectory.is_file():
        return {}
    wanted = {role: (scene, before) for role, scene, before in roles}
    found: dict[str, str] = {}
    for event in iter_events(trajectory):
        if (isinstance(event, UserMessageEvent) and event.update is None
                and event.role in wanted and event.session_id and event.turn is not None):
            scene, before = wanted[event.role]
            if event.scene == scene and event.turn < before:
                found[event.role] = event.session_id
    return found


def _history_roles(steps: Sequence[Step], at: int) -> list[tuple[str, str | None, int]]:
    """(role, scene, turn) for each role's first step from `at` on that had turns before."""
    if at >= len(steps):
        return []
    fork_step = steps[at]
    seen: set[str] = set()
    out = []
    for step in steps[at:]:
        if step.role.name in seen:
            continue
        seen.add(step.role.name)
        before = fork_step.turn_index if step.scene_index == fork_step.scene_index else 0
        out.append((step.role.name, step.scene, before))
    return out


async def _check_snapshot_exists(backend: str, provider_config: dict, name: str) -> None:
    from benchflow.sandbox.factory import create_sandbox
    from benchflow.sandbox.spec import SandboxSpec

    box = create_sandbox(backend, SandboxSpec(name="fork-check"), provider_config)
    if isinstance(box, SnapshotSandbox) and not await box.snapshot_exists(name):
        raise ConfigError(f"snapshot {name} no longer exists (removed with its job?); "
                          "nothing to fork from")


def fork_steps(fork: ForkSource, steps: Sequence[Step]) -> list[Step]:
    """The steps a fork runs: from `fork.step` on, each role's first one with its history,
    in new sessions."""
    out: list[Step] = []
    started: set[str] = set()
    for step in steps[fork.step:]:
        name = step.role.name
        if name not in started and name in fork.history:
            step = dataclasses.replace(step, history=fork.history[name])
        started.add(name)
        out.append(step)
    return assign_sessions(out)


def start_from_fork(sandbox: Sandbox, fork: ForkSource) -> None:
    """Make the sandbox's start use the fork's snapshot."""
    if not isinstance(sandbox, SnapshotSandbox):
        raise ConfigError(f"the {sandbox.backend} sandbox backend cannot start from a snapshot")
    sandbox.start_from_snapshot(fork.snapshot)


async def fork_baseline(sandbox: Sandbox | None, fork: ForkSource) -> Baseline | None:
    """The original rollout's hardening baseline, made current for the restored sandbox
    (its processes, and the digest of its files), or None when the original had none."""
    if fork.baseline is None or sandbox is None:
        return None
    baseline = Baseline.model_validate(fork.baseline)
    _, data = await run_script(sandbox, "rebase.sh", baseline.dir, timeout=120)
    return baseline.model_copy(update={"digest": str(data["digest"])})


__all__ = ["ForkPlan", "fork_baseline", "fork_steps", "plan_fork", "start_from_fork"]
