"""The hardened path's baseline and harden.sh folded into the agent's own exec.

A hardened rollout takes a baseline before the agent (one exec), runs the agent, and runs
harden.sh before the final verifier (one more). When the agent's whole run is one command
run as root (the oracle's solve.sh), `HardenFold.run()` does all three in that command's
exec instead (`scripts/fold.sh`): baseline.sh, then the agent, then harden.sh, whose kill
comes first. Two execs fewer; nothing secret in the exec (the scripts are benchflow's own,
public; the tests are uploaded only after this exec has ended, as without the fold).

What the host believes:

- baseline.sh's JSON line is the first line: fold.sh prints it before the agent starts, so
  nothing the agent runs can write ahead of it. No valid line: `VerifierError`, as when
  the baseline's own exec fails (the agent never ran).
- harden.sh's result is the last line, and only when the exec exited 0: fold.sh exits 0
  only after harden.sh's kill, once no process the agent started can write; killed
  early (the agent can kill it), its code is 128+signal and the daemon says so, not the
  agent. Otherwise (killed, timed out, harden.sh failed or found the baseline changed,
  an unreadable line, a second line that looks like it) the final verify runs harden.sh in an exec of its own, exactly as
  without the fold (`BASELINE_TAMPERED` and the rest come from there).

The fold declines (a baseline exec of its own, then the agent's exec, as before) for a
non-root agent (its privileges are the exec's user) and for an agent environment that sets
what the scripts read (PATH, PYTHON*, LD_*, ...). Which rollouts fold at all is the
rollout's choice (`Rollout._harden_fold`): one oracle step, nothing between the agent and
the verify that must see the sandbox as the agent left it.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from benchflow.errors import VerifierError
from benchflow.sandbox.base import SYSTEM_PATH, ExecResult, Sandbox
from benchflow.sandbox.exit_codes import TIMEOUT_EXIT_CODES, ExitCode
from benchflow.task.models import HardeningConfig
from benchflow.verify._scripts import resource_text, script_text
from benchflow.verify.baseline import (
    Baseline,
    baseline_args,
    baseline_from,
    baseline_timeout,
    normalize_workspace,
    take_baseline,
)
from benchflow.verify.hardening import HARDEN_TIMEOUT_SEC, harden_args

FOLD_MARK = b"\nbenchflow-fold "
"""What starts fold.sh's last line (after a newline of its own)."""

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCRIPT_VARS = re.compile(r"PATH|HOME|IFS|ENV|BASH_ENV|SHELL|SHELLOPTS|BASHOPTS|CDPATH"
                          r"|POSIXLY_CORRECT|LC_\w+|LANG|PYTHON\w*|LD_\w+|fold_pid|TMPDIR")
"""Agent environment names that would change what baseline.sh or harden.sh see (they
run with the image's environment): the fold declines such an environment."""


def foldable_env(env: Mapping[str, str]) -> bool:
    """Whether the fold can give the scripts the image's environment back (each key unset)."""
    return all(_KEY.fullmatch(k) and not _SCRIPT_VARS.fullmatch(k) for k in env)


@dataclasses.dataclass
class HardenFold:
    """One rollout's pending fold: what baseline.sh and harden.sh need, then what it found.

    The rollout makes it in place of the baseline's exec; the agent runs its command
    through `run()` (once); the final verify reads `baseline` and `hardened`."""

    workspace: str | None
    config: HardeningConfig
    verifier_mount: str
    named: tuple[str, ...] = ()
    agent_user: str | None = None
    ran: bool = False
    """`run()` was called (the agent's command started, folded or not)."""
    baseline: Baseline | None = None
    hardened: dict[str, Any] | None = None
    """harden.sh's JSON line, when it ran in the fold and the host may believe it."""

    async def run(self, sandbox: Sandbox, argv: Sequence[str], *, user: str,
                  cwd: str | None, env: Mapping[str, str], timeout: float) -> ExecResult:
        """Run the agent's `argv` as `user` within `timeout`, the baseline before it and
        harden.sh after it in the same exec where the fold applies; returns the agent's
        own result (its exit code and output; `timed_out` at its deadline).

        Raises:
            VerifierError: the baseline failed (the agent did not run).
        """
        self.ran = True
        ws = normalize_workspace(self.workspace)
        scrub = self.config.scrub_git_history
        if user not in ("root", "0") or not foldable_env(env):
            self.baseline = await take_baseline(sandbox, workspace=ws, named=self.named,
                                                scrub_git=scrub)
            return await sandbox.exec(argv, user=user, cwd=cwd, env=env, timeout=timeout)
        bargs = baseline_args(ws, named=self.named, scrub_git=scrub)
        hargs = harden_args(self.agent_user, self.config, self.verifier_mount)
        fold_argv = ["sh", "-c", resource_text("fold.sh"), "fold",
                     script_text("baseline.sh"), script_text("harden.sh"), *bargs[:6],
                     "\n".join(bargs[6:]), *hargs[:3], "\n".join(hargs[3:]),
                     f"{max(timeout, 0.01):.3f}", "\n".join(env), SYSTEM_PATH, *argv]
        backstop = timeout + baseline_timeout(bargs) + HARDEN_TIMEOUT_SEC
        started = time.monotonic()
        result = await sandbox.exec(fold_argv, user="root", cwd=cwd, env=env, timeout=backstop)
        first, newline, rest = result.stdout.partition(b"\n")
        data = _json(first) if newline else None
        if data is None or "digest" not in data:
            why = ("exceeded its timeout" if result.timed_out
                   else f"exited with code {result.exit_code} ({_meaning(result.exit_code)})")
            raise VerifierError(f"baseline.sh (in the agent's exec) {why}; output tail:\n"
                                f"{result.text(1500)}")
        self.baseline = baseline_from(data, ws, 0.0)
        agent, hardened = split_fold(result, rest, timeout=timeout,
                                     elapsed=time.monotonic() - started)
        self.hardened = hardened
        return agent


def split_fold(result: ExecResult, rest: bytes, *, timeout: float, elapsed: float
               ) -> tuple[ExecResult, dict[str, Any] | None]:
    """The agent's result and harden.sh's JSON (None: not to be believed, or it failed) from
    a fold exec's `result`, `rest` being its stdout after baseline.sh's line."""
    head, sep, last = rest.rpartition(FOLD_MARK)
    if result.exit_code != ExitCode.OK or result.timed_out:
        return dataclasses.replace(result, stdout=rest), None  # killed: the exec's own code
    if not sep or FOLD_MARK in head:
        # fold.sh exits 0 only after its last line; a second mark is the agent's (printed
        # before, or after by a process the kill missed): which one is fold.sh's is unknown
        return dataclasses.replace(result, stdout=rest, exit_code=-1), None
    fields = last.rstrip(b"\n").split(b" ", 2)
    try:
        agent_code, harden_code = int(fields[0]), int(fields[1])
    except (ValueError, IndexError):
        return dataclasses.replace(result, stdout=rest, exit_code=-1), None
    data = _json(fields[2]) if len(fields) == 3 and harden_code == ExitCode.OK else None
    timed_out = agent_code in TIMEOUT_EXIT_CODES and elapsed >= timeout * 0.99
    return ExecResult(agent_code, head, result.stderr, timed_out), data


def _json(line: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _meaning(code: int) -> str:
    try:
        return ExitCode(code).name
    except ValueError:
        return "unexpected"


__all__ = ["FOLD_MARK", "HardenFold", "foldable_env", "split_fold"]
