"""Run a task's verifier in the sandbox and turn what it left into rewards.

test.sh is uploaded to the verifier folder (`/verifier` native, `/tests` legacy), made
executable and run directly from the working directory, never handed to pytest; a
native task's script strategy runs `cd /verifier && <command>` instead (its `command`,
`./test.sh` by default). A non-zero exit is `verifier_failed` and any reward file is
ignored.
"""

from __future__ import annotations

import base64
import logging
import os
import shlex
import stat
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from benchflow.errors import VerifierFailed, VerifierTimeout
from benchflow.paths import write_bytes
from benchflow.sandbox.archive import tar_path
from benchflow.sandbox.base import ExecResult, Sandbox
from benchflow.sandbox.exit_codes import ExitCode
from benchflow.task import Task
from benchflow.verify._scripts import after_chained, chained_argv, script_argv, split_chained
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
    command: str | None = None
    """The script strategy's shell command, run as `cd <mount> && <command>`; None runs
    `<mount>/test.sh` from `cwd` (the legacy layout, as Harbor does)."""


@dataclass(frozen=True)
class VerifierOutcome:
    rewards: dict[str, float]
    exec_result: ExecResult

    @property
    def reward(self) -> float:
        return self.rewards["reward"]


_HEADLINE_MEAN = ("import json,sys; p=sys.argv[1]; d=json.load(open(p)); "
                  "d.setdefault('reward', sum(d.values())/len(d)) if d else None; "
                  "json.dump(d, open(p, 'w'))")


def rewardkit_command(tests_dir: str, requirement: str) -> str:
    """Harbor's rewardkit on the verifier folder (`rewardkit <tests> --workspace <ws>
    --output /logs/verifier/reward.json`): the image's `rewardkit`, else `uvx`, else a
    venv with `requirement`. Without a `reward` in its output, the headline is the mean of
    the named rewards."""
    q = shlex.quote
    return ('export LITELLM_LOCAL_MODEL_COST_MAP="${LITELLM_LOCAL_MODEL_COST_MAP:-True}"; '
            'if command -v rewardkit >/dev/null 2>&1; then set -- rewardkit; '
            f'elif command -v uvx >/dev/null 2>&1; then set -- uvx --from {q(requirement)} '
            'rewardkit; else python3 -m venv /tmp/bf-rewardkit && /tmp/bf-rewardkit/bin/pip '
            f'install --quiet {q(requirement)} && set -- /tmp/bf-rewardkit/bin/rewardkit; fi; '
            f'"$@" {q(tests_dir)} --workspace "$BENCHFLOW_WORKSPACE" '
            f'--output {VERIFIER_LOGS}/reward.json '
            f'&& python3 -c {q(_HEADLINE_MEAN)} {VERIFIER_LOGS}/reward.json')


def script_command(task: Task) -> str | None:
    """The command a task's verifier runs from its verifier folder: the native script
    strategy's (`./test.sh` by default), a legacy task's `[verifier] command`, rewardkit
    for `reward-kit`; None runs a legacy test.sh from the workdir, as Harbor does."""
    doc = task.verifier_doc
    if doc.strategy == "reward-kit":
        return rewardkit_command(doc.tests_dir, doc.rewardkit)
    if task.layout == "legacy":
        return task.config.verifier.command
    return doc.script_command


INLINE_VERIFIER_MAX = 48 << 10
"""The largest verifier folder (as a tar) that travels inside the exec that runs test.sh;
base64 keeps one argument well under Linux's 128 KiB per argument."""


def inline_verifier(run: VerifierRun) -> str | None:
    """The verifier folder as a base64 tar of `run.mount` (for `unpack.sh`), or None when it
    is larger than `INLINE_VERIFIER_MAX` (it is uploaded instead). An exec's arguments are
    world-readable (/proc/PID/cmdline): see `run_test_script(carry=...)` for where it may go."""
    key = (run.verifier_dir, run.mount)
    stamp = _tree_stamp(run.verifier_dir)
    cached = _INLINED.get(key)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    started = time.time_ns()
    data = tar_path(run.verifier_dir, run.mount)
    archive = base64.b64encode(data).decode() if len(data) <= INLINE_VERIFIER_MAX else None
    # kept unless a file changed in the last second (an edit within the same clock tick as
    # the archive's read would leave the stamp as it was: "racily clean", as git says)
    if stamp and max(s[4] for s in stamp) < started - 1_000_000_000:
        with _INLINED_LOCK:  # worker threads of several rollouts at once
            if len(_INLINED) >= 64:
                del _INLINED[next(iter(_INLINED))]
            _INLINED[key] = (stamp, archive)
    return archive


_Stamp = tuple[tuple[str, int, int, int, int, int, int, int], ...]
_INLINED: dict[tuple[Path, str], tuple[_Stamp, str | None]] = {}
"""`inline_verifier`'s archives by folder, with the stamp of the tree they were made from:
hundreds of rollouts of one task verify with the same folder."""
_INLINED_LOCK = threading.Lock()


def _tree_stamp(root: Path) -> _Stamp:
    """Name, mode, size, mtime, ctime, inode, owner and group of `root` and everything under
    it (links not followed, as the archive does not): what a tar of the tree is made of (the
    ctime: an edit that puts size and mtime back still moves it)."""
    found = []
    pending = [""]
    while pending:
        rel = pending.pop()
        path = os.path.join(root, rel) if rel else os.fspath(root)
        try:
            st = os.lstat(path)
        except OSError:
            return ()
        found.append((rel, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
                      st.st_uid, st.st_gid))
        if stat.S_ISDIR(st.st_mode):
            try:
                pending.extend(os.path.join(rel, name) for name in os.listdir(path))
            except OSError:
                return ()
    return tuple(sorted(found))


async def upload_verifier(sandbox: Sandbox, run: VerifierRun) -> None:
    """Copy the task's verifier folder into the sandbox."""
    await sandbox.upload(run.verifier_dir, run.mount)


def verifier_argv(run: VerifierRun, *, reset_logs: bool = True, logs_mode: str = "755",
                  shell: str = "sh") -> tuple[list[str], str | None, str]:
    """The argv that starts test.sh (or the script strategy's command) as `run_test_script`
    runs it, the working folder of its exec, and what it is called in errors."""
    script = f"{run.mount}/test.sh"
    # Reward files written before this moment never count. A process left writing into the
    # folder (no kill: the plain verify) can make rm fail ("Directory not empty"): the folder
    # is then renamed away whole, atomically, and removed as far as it goes.
    stale = "/logs/.verifier-stale-$$"
    reset = (f'{{ rm -rf {VERIFIER_LOGS} 2>/dev/null || {{ mv {VERIFIER_LOGS} {stale} && '
             f'{{ rm -rf {stale} 2>/dev/null; :; }}; }}; }} && '
             f'mkdir -p -m "$1" {VERIFIER_LOGS} && ' if reset_logs else "")
    if run.command is None:
        launch = reset + '{ [ -x "$0" ] || chmod +x "$0"; } && exec "$0"'  # chmod: a fork
        argv, cwd = [script], run.cwd
        what = "test.sh"
    else:  # the native script strategy: `cd /verifier && <command>`
        # the default command started by this shell itself, not by one more `sh -c`
        run_it = 'exec ./test.sh' if run.command == "./test.sh" else 'exec sh -c "$2"'
        launch = reset + ('cd "$0" && { [ ! -f test.sh ] || [ -x test.sh ] || chmod +x test.sh; } '
                          f'&& BENCHFLOW_WORKSPACE="$3" && export BENCHFLOW_WORKSPACE && {run_it}')
        argv, cwd = [run.mount], run.mount
        what = ("test.sh" if run.command == "./test.sh" else "rewardkit"
                if "rewardkit" in run.command else f"the verifier command {run.command!r}")
    return [shell, "-c", launch, *argv, logs_mode, run.command or "", run.cwd or "/"], cwd, what


async def run_test_script(sandbox: Sandbox, run: VerifierRun, out_dir: Path, *,
                          reset_logs: bool = True, logs_mode: str = "755",
                          before: Sequence[Sequence[str]] = (), shell: str = "sh",
                          carry: bool = False) -> ExecResult:
    """Execute test.sh as root with its timeout; keep stdout/stderr under `out_dir`.

    In the same exec, right before test.sh starts, /logs/verifier is emptied and recreated
    root-owned with `logs_mode` (hardening's `reset_verifier_logs=false` passes
    `reset_logs=False`; `lock_verifier_dirs=false` passes "777"). `before`: argvs (e.g.
    `hardening.seal_argv()`) run first in that exec, as root, each of which must succeed:
    one round trip to the sandbox instead of one more per command. `shell`: the one that
    chains them and launches test.sh (`/bin/sh` after hardening: the exec's PATH is the
    image's, filtered).

    `carry`: put the verifier folder in place too, first in this exec (`unpack.sh`: one
    upload fewer) when it is small and the image has base64 and tar, else by an upload.
    An exec's arguments are world-readable (/proc/PID/cmdline), as an uploaded folder is:
    carry only where no process the agent left still runs (after harden.sh's kill), or
    where an upload would be as readable to one (the plain verify).

    Raises:
        VerifierError: a command of `before` failed (test.sh did not run).
        VerifierTimeout: test.sh ran past `timeout_sec`.
        VerifierFailed: test.sh exited non-zero.
    """
    argv, cwd, what = verifier_argv(run, reset_logs=reset_logs, logs_mode=logs_mode,
                                    shell=shell)
    archive = await anyio.to_thread.run_sync(inline_verifier, run) if carry else None
    if archive is not None:
        steps = [[shell, *script_argv("unpack.sh", run.mount, archive)[1:]], *before]
        # cwd: the workdir (the mount exists once unpack.sh ran; the script strategy's
        # launch changes into it itself)
        result = await sandbox.exec(chained_argv(steps, argv, shell=shell), user="root",
                                    cwd=run.cwd, env=dict(run.env), timeout=run.timeout_sec)
        if result.exit_code != ExitCode.NO_TOOLS or split_chained(result) is not None:
            return await check_verifier_result(after_chained(result, steps, what), run,
                                               out_dir, what)
    if carry:  # too large, or the image cannot unpack it
        await upload_verifier(sandbox, run)
    result = await sandbox.exec(chained_argv(before, argv, shell=shell), user="root", cwd=cwd,
                                env=dict(run.env), timeout=run.timeout_sec)
    if before:
        result = after_chained(result, before, what)
    return await check_verifier_result(result, run, out_dir, what)


async def check_verifier_result(result: ExecResult, run: VerifierRun, out_dir: Path, what: str
                       ) -> ExecResult:
    """Keep test.sh's stdout/stderr under `out_dir`; raise for a timeout or a failure.

    Raises:
        VerifierTimeout: test.sh ran past `timeout_sec`.
        VerifierFailed: test.sh exited non-zero.
    """
    await anyio.to_thread.run_sync(_keep_output, out_dir, result)  # off the event loop
    if result.timed_out:
        raise VerifierTimeout("verifier", run.timeout_sec,
                              f"{what} exceeded verifier timeout of {run.timeout_sec:g} s")
    if result.exit_code != 0:
        raise VerifierFailed(f"{what} exited with code {result.exit_code} (any reward file is "
                             f"ignored); output tail:\n{result.text(1500)}")
    return result


def _keep_output(out_dir: Path, result: ExecResult) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_bytes(out_dir / "stdout.txt", result.stdout)  # 3 system calls a file, not 7
    write_bytes(out_dir / "stderr.txt", result.stderr)


async def verify(sandbox: Sandbox, run: VerifierRun, logs_dir: Path) -> VerifierOutcome:
    """Upload, run, download `/logs` to `logs_dir` and parse the rewards.

    A small verifier folder travels in test.sh's exec (`unpack.sh`: one round trip fewer;
    nothing is killed here, and an uploaded folder would be as readable to what the agent
    left); an image without base64 or tar gets it uploaded after all. test.sh's stdout/stderr go
    to `logs_dir/verifier/`. When test.sh fails, `/logs` is not downloaded here: the
    rollout's cleanup collects it for every outcome.
    """
    result = await run_test_script(sandbox, run, logs_dir / "verifier", carry=True)
    await sandbox.download("/logs", logs_dir)
    rewards = await anyio.to_thread.run_sync(read_rewards, logs_dir / "verifier")
    return VerifierOutcome(rewards, result)
