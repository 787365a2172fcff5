"""Hardening before the final verify: undo or expose whatever the agent did to fake a pass.

The rollout calls, in order:

1. `take_baseline()` (baseline.py) after the agent is installed, before its first turn;
   `protect_paths()` on the tests and solution folders whenever they are in the sandbox
   while the agent runs.
2. `verify_hardened()` instead of `runner.verify()`: `harden()` (kill the agent's
   processes, restore the workspace's build/test files, remove injected files, check the
   interpreter and PATH folders, empty the verifier folder), then one exec: the verifier
   folder unpacked fresh (an upload when it is large or the kill is off), `seal()`
   (verifier folder root-only), /logs/verifier emptied and recreated root-owned, and
   test.sh in `verifier_env()`.

Where the agent's run is one root command (the oracle), `fold.py` runs 1. and `harden()`'s
script in that command's exec instead, and `verify_hardened(folded=...)` takes its report.

Every step is on by default and switched off only through `HardeningConfig`. A change
that cannot be undone raises `VerifierTampered` (reward null): never a silent score.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from pydantic import Field

from benchflow._models import FrozenModel
from benchflow.errors import VerifierTampered
from benchflow.sandbox.base import Sandbox
from benchflow.task.models import HardeningConfig
from benchflow.verify._scripts import run_script, script_argv
from benchflow.verify.baseline import VERIFIER_TOOLS_DIR, Baseline, take_baseline
from benchflow.verify.rewards import read_rewards
from benchflow.verify.runner import VERIFIER_LOGS, VerifierOutcome, VerifierRun, run_test_script
from benchflow.verify.verifier_env import verifier_env

log = logging.getLogger(__name__)

SECRET_DIRS = ("/oracle", "/solution", "/tests", "/verifier")
"""Folders whose files a workspace symlink must never reach (besides the verifier mount)."""

_REPORT_LIMIT = 200


class HardeningReport(FrozenModel):
    """What `harden()` did; saved as `verifier/hardening.json` in the rollout folder."""

    steps: tuple[str, ...] = ()
    """The HardeningConfig steps that ran."""
    killed: int = 0
    """Processes killed (the agent user's, and any started after the baseline)."""
    survivors: int = 0
    """Agent processes still alive after SIGKILL (non-zero fails the rollout closed)."""
    restored: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    tampered: tuple[str, ...] = ()
    """Changes that could not be undone; non-empty raises VerifierTampered."""
    notes: tuple[str, ...] = ()
    pytest_plugins: tuple[str, ...] = ()
    """The image's own pytest plugin modules (from the baseline) the verifier may load."""
    pytest_plugins_untrusted: tuple[str, ...] = ()
    """Plugin distributions in the image left unloaded (a file the agent user could write)."""
    duration_sec: float = Field(default=0.0, ge=0)

    @property
    def clean(self) -> bool:
        return not self.tampered and not self.survivors


def _steps(config: HardeningConfig) -> dict[str, str]:
    """The harden.sh step letters of the enabled steps, by HardeningConfig field."""
    letters = {
        "kill_agent_processes": "k",
        "restore_build_config": "r",
        "remove_injected_files": "i",
        "check_system_integrity": "s",
    }
    steps = {name: letter for name, letter in letters.items() if getattr(config, name)}
    if config.removes_conftests:
        steps["cleanup_conftests"] = "c"
    return steps


def _capped(items: Sequence[str]) -> tuple[str, ...]:
    items = tuple(items)
    if len(items) <= _REPORT_LIMIT:
        return items
    return (*items[:_REPORT_LIMIT], f"... and {len(items) - _REPORT_LIMIT} more")


def _agent_user_arg(agent_user: str | None) -> str:
    return "" if agent_user in (None, "", "root", "0") else str(agent_user)


HARDEN_TIMEOUT_SEC = 300.0


async def harden(sandbox: Sandbox, baseline: Baseline, *, agent_user: str | None,
                 config: HardeningConfig, verifier_mount: str, protected: Sequence[str] = (),
                 timeout: float = HARDEN_TIMEOUT_SEC) -> HardeningReport:
    """Put the sandbox back to its pre-agent state where it matters to the verifier.

    Kills the agent user's processes and every process started after the baseline
    (frozen with SIGSTOP until none is left running, then SIGKILL twice), restores the
    workspace's tracked build/test files from the baseline copy, removes injected files,
    checks the interpreter and PATH folders, and empties `verifier_mount` for the fresh
    copy. One root exec. `agent_user` None or "root" means a root agent.

    Raises:
        VerifierTampered: something the agent changed could not be undone, agent processes
            survived, or the baseline itself was modified. `.report` holds the report.
        VerifierError: the script failed.
    """
    started = time.monotonic()
    _, data = await run_script(sandbox, "harden.sh", baseline.dir, baseline.digest,
                               baseline.workspace or "/", *harden_args(agent_user, config,
                                                                       verifier_mount, protected),
                               timeout=timeout)
    return harden_report(data, baseline, config, time.monotonic() - started)


def harden_args(agent_user: str | None, config: HardeningConfig, verifier_mount: str,
                protected: Sequence[str] = ()) -> list[str]:
    """harden.sh's arguments after BASE, DIGEST and WORKSPACE."""
    return [_agent_user_arg(agent_user), "".join(_steps(config).values()), verifier_mount,
            VERIFIER_LOGS, *SECRET_DIRS, *protected]


def harden_report(data: Mapping[str, Any], baseline: Baseline, config: HardeningConfig,
                  duration: float) -> HardeningReport:
    """The report of harden.sh's JSON line (`data`).

    Raises:
        VerifierTampered: see `harden()`.
    """
    report = HardeningReport(
        steps=tuple(_steps(config)), killed=int(data.get("killed", 0)),
        survivors=int(data.get("survivors", 0)),
        restored=_capped(data.get("restored", ())), removed=_capped(data.get("removed", ())),
        tampered=_capped(data.get("tampered", ())), notes=_capped(data.get("notes", ())),
        pytest_plugins=baseline.pytest_plugins,
        pytest_plugins_untrusted=baseline.pytest_plugins_untrusted,
        duration_sec=duration)
    log.info("hardening: killed %d, restored %d, removed %d, tampered %d (%.2f s)",
             report.killed, len(report.restored), len(report.removed), len(report.tampered),
             report.duration_sec)
    if not report.clean:
        problems = list(report.tampered)
        if report.survivors:
            problems.append(f"{report.survivors} agent processes survived SIGKILL")
        exc = VerifierTampered("the agent tampered with what the verifier trusts: "
                               + "; ".join(problems))
        exc.report = report  # type: ignore[attr-defined]
        raise exc
    return report


async def seal(sandbox: Sandbox, verifier_mount: str, *, lock: bool) -> None:
    """After the verifier upload: make the folder root's; with `lock`, root-only (0700), and
    /logs/verifier and /logs unwritable by anyone but root. Always recreates
    `VERIFIER_TOOLS_DIR` empty and root-owned, for the tools test.sh installs with uv or pip.
    (The verify paths run `seal_argv()` in test.sh's own exec instead: one round trip.)"""
    await run_script(sandbox, "seal.sh", verifier_mount, VERIFIER_LOGS, "1" if lock else "0",
                     VERIFIER_TOOLS_DIR, "", "", timeout=60, parse=False)


def _workspace_to_lock(workspace: str | None, config: HardeningConfig) -> str | None:
    return workspace if config.lock_workspace and workspace and workspace != "/" else None


async def lock_workspace(sandbox: Sandbox, workspace: str | None, config: HardeningConfig
                         ) -> None:
    """The workspace root's and read-only to everyone else (`lock_workspace`), before the
    final verifier (never between rounds: the agent goes on after a soft verify)."""
    if (path := _workspace_to_lock(workspace, config)) is not None:
        await run_script(sandbox, "lock_workspace.sh", path, timeout=300, parse=False)


def seal_argv(verifier_mount: str, *, lock: bool, reset_logs_mode: str | None = None,
              workspace: str | None = None) -> list[str]:
    """`seal()` as an argv, for `run_test_script(before=...)` (by absolute path: the
    verifier's PATH is the image's, filtered). `reset_logs_mode`: also empty and recreate
    /logs/verifier with this mode (instead of test.sh's launch: pass `reset_logs=False`
    there). `workspace`: also `lock_workspace()` it, sharing the folder's `chown -R` and
    `chmod -R` (no shell and two programs of its own)."""
    return ["/bin/sh", *script_argv("seal.sh", verifier_mount, VERIFIER_LOGS,
                                    "1" if lock else "0", VERIFIER_TOOLS_DIR,
                                    reset_logs_mode or "", workspace or "")[1:]]


async def protect_paths(sandbox: Sandbox, paths: Sequence[str], agent_user: str | None = None
                        ) -> None:
    """Make each folder root-owned and 0700 (created if missing) while the agent runs.

    Call it after uploading tests or a solution that must sit in the sandbox during the
    agent's turns (and on /logs/verifier), so that the agent user can neither read nor write
    them. A root agent cannot be kept out; `agent_user` is accepted for the log line.
    """
    if not paths:
        return
    await run_script(sandbox, "protect.sh", *paths, timeout=60, parse=False)
    log.debug("protected %s from %s", ", ".join(paths), agent_user or "root")


@dataclasses.dataclass(frozen=True)
class HardenedOutcome:
    """The final verifier's outcome and what hardening did before it."""

    outcome: VerifierOutcome
    report: HardeningReport


async def verify_hardened(sandbox: Sandbox, run: VerifierRun, out_dir: Path, logs_dir: Path, *,
                          baseline: Baseline, agent_user: str | None, config: HardeningConfig,
                          pytest_plugins: Sequence[str] = (), protected: Sequence[str] = (),
                          task_files: Mapping[str, Path] | None = None,
                          folded: Mapping[str, Any] | None = None) -> HardenedOutcome:
    """The final verify: harden; then, in one exec, the verifier folder fresh, the seal and
    test.sh; read the rewards.

    Writes `out_dir/hardening.json` (also when tampering is found), test.sh's stdout/stderr
    to `logs_dir/verifier/`, and downloads `/logs` to `logs_dir` when test.sh succeeded
    (otherwise the rollout's cleanup collects it).

    `task_files` maps sandbox paths to host files the task itself placed after the baseline
    (a multi-step task's `steps/<name>/workdir/`): when hardening removes or restores one of
    them, the task's own version is put back, never what the agent left there.

    `folded`: harden.sh's JSON line from the agent's own exec (`fold.py`), where it already
    ran, after the agent, with the kill first; None runs it here in an exec of its own.

    Raises:
        VerifierTampered: see `harden()`.
        VerifierFailed, VerifierTimeout, RewardMissingError, RewardInvalidError: as `verify()`.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    report_path = out_dir / "hardening.json"
    try:
        if folded is not None:
            report = harden_report(folded, baseline, config, 0.0)
        else:
            report = await harden(sandbox, baseline, agent_user=agent_user, config=config,
                                  verifier_mount=run.mount, protected=protected)
    except VerifierTampered as exc:
        tampered = getattr(exc, "report", None)
        if tampered is not None:
            report_path.write_text(tampered.model_dump_json(indent=2))
        raise
    replaced = [p for p in dict.fromkeys((*report.removed, *report.restored))
                if p in (task_files or {})]
    for path in replaced:
        await sandbox.upload((task_files or {})[path], path)
    if replaced:
        report = report.model_copy(update={"notes": (*report.notes, *(
            f"put back as the task placed it (a step's workdir): {p}" for p in replaced))})
    report_path.write_text(report.model_dump_json(indent=2))
    # The folder enters the sandbox only now, after harden.sh's exec ended: never in an
    # exec's argv, env or stdin before the kill, which /proc shows to any process (one the
    # agent left would read the tests there). Once everything the agent left is killed,
    # it travels in test.sh's own exec (one upload fewer); else it is uploaded.
    carry = config.kill_agent_processes
    if not carry:
        await sandbox.upload(run.verifier_dir, run.mount)
    logs_mode = None  # the seal resets /logs/verifier and locks the workspace too (fewer forks)
    if config.reset_verifier_logs:
        logs_mode = "755" if config.lock_verifier_dirs else "777"
    env = verifier_env(workspace=baseline.workspace or run.cwd, verifier_dir=run.mount,
                       task_env=run.env, pytest_plugins=pytest_plugins, config=config,
                       baseline=baseline)
    result = await run_test_script(sandbox, dataclasses.replace(run, env=env),
                                   logs_dir / "verifier",
                                   reset_logs=False,
                                   before=[seal_argv(
                                       run.mount, lock=config.lock_verifier_dirs,
                                       reset_logs_mode=logs_mode, workspace=_workspace_to_lock(
                                           baseline.workspace or run.cwd, config))],
                                   shell="/bin/sh", carry=carry)
    await sandbox.download("/logs", logs_dir)
    rewards = await anyio.to_thread.run_sync(read_rewards, logs_dir / "verifier")
    return HardenedOutcome(VerifierOutcome(rewards, result), report)


__all__ = [
    "HARDEN_TIMEOUT_SEC",
    "SECRET_DIRS",
    "Baseline",
    "HardenedOutcome",
    "HardeningReport",
    "harden",
    "harden_args",
    "harden_report",
    "lock_workspace",
    "protect_paths",
    "seal",
    "seal_argv",
    "take_baseline",
    "verifier_env",
    "verify_hardened",
]
