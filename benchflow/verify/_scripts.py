"""Run the hardening shell scripts inside a sandbox and read the JSON line they print.

Each script is `common.sh` followed by the script's own text, run as root with
`sh -c TEXT NAME ARGS...`: the text comes from benchflow's package, never from a file in
the sandbox the agent could have edited, and every value travels as an argument.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchflow.errors import VerifierError, VerifierTampered
from benchflow.sandbox.base import SYSTEM_PATH, ExecResult, Sandbox  # SYSTEM_PATH: re-exported
from benchflow.sandbox.exit_codes import ExitCode

SCRIPTS_DIR = Path(__file__).parent / "scripts"


@functools.cache
def script_text(name: str) -> str:
    """The text `sh -c` runs for `name` (e.g. "harden.sh"): common.sh, then the script."""
    return (SCRIPTS_DIR / "common.sh").read_text() + "\n" + (SCRIPTS_DIR / name).read_text()


@functools.cache
def resource_text(name: str) -> str:
    """A script resource passed as an argument (pyinfo.py)."""
    return (SCRIPTS_DIR / name).read_text()


def script_argv(name: str, *args: str) -> list[str]:
    """The argv that runs script `name` with `args` (values are arguments, never code)."""
    return ["sh", "-c", script_text(name), name.removesuffix(".sh"), *args]


_BEFORE_DONE = "benchflow: scripts before done"
"""Printed once the `before` scripts succeeded: its absence means one of them failed."""


def chained_argv(before: Sequence[Sequence[str]], main: Sequence[str], *,
                 shell: str = "sh") -> list[str]:
    """One argv that runs each of `before` in turn (their output to stderr; the first that
    fails ends it with its exit code), then prints `_BEFORE_DONE` and execs `main`: one
    round trip to the sandbox instead of several. Values stay arguments, never code.
    `shell`: the one that chains them (`/bin/sh` where PATH may hold what an agent put)."""
    if not before:
        return list(main)
    steps, args = [], []
    for argv in [*before, main]:
        first = len(args) + 1
        args.extend(argv)
        steps.append(" ".join(f'"${{{i}}}"' for i in range(first, len(args) + 1)))
    body = "".join(f"{step} >&2 || exit; " for step in steps[:-1])
    return [shell, "-c", f"{body}echo '{_BEFORE_DONE}'; exec {steps[-1]}", "chained", *args]


def split_chained(result: ExecResult) -> tuple[bytes, ExecResult] | None:
    """A `chained_argv` exec's stdout before the done-marker and the main command's result;
    None when a step before it failed."""
    head, sep, rest = result.stdout.partition(_BEFORE_DONE.encode() + b"\n")
    if not sep:
        return None
    return head, dataclasses.replace(result, stdout=rest)


def after_chained(result: ExecResult, before: Sequence[Sequence[str]], what: str) -> ExecResult:
    """The main command's result of a `chained_argv` exec (the done-marker removed).

    Raises:
        VerifierError: one of `before` failed, so `what` never ran.
    """
    split = split_chained(result)
    if split is None or split[0]:
        names = ", ".join(argv[3] if len(argv) > 3 else argv[0] for argv in before)
        raise VerifierError(f"a script run before {what} ({names}) exited with code "
                            f"{result.exit_code}; output tail:\n{result.text(1500)}")
    return split[1]


async def run_script(sandbox: Sandbox, name: str, *args: str, timeout: float,
                     parse: bool = True, image_path: bool = False,
                     before: Sequence[Sequence[str]] = ()) -> tuple[ExecResult, dict[str, Any]]:
    """Run script `name` as root; return its result and its last stdout line as JSON.

    The exec's PATH is `SYSTEM_PATH`, unless `image_path` (only for the baseline, taken
    before the agent's first turn, which records the image's PATH). `before`: argvs
    (`script_argv(...)`) run first in the same exec, each of which must succeed.

    Raises:
        VerifierTampered: the script found its baseline changed (`BASELINE_TAMPERED`).
        VerifierError: the script (or one run before it) failed, or it printed no JSON.
    """
    env = None if image_path else {"PATH": SYSTEM_PATH}
    result = await sandbox.exec(chained_argv(before, script_argv(name, *args)), user="root",
                                env=env, timeout=timeout)
    if result.timed_out:
        raise VerifierError(f"{name} exceeded its timeout of {timeout:g} s")
    if before:
        result = after_chained(result, before, name)
    if result.exit_code == ExitCode.BASELINE_TAMPERED:
        raise VerifierTampered("the hardening baseline saved before the agent ran was modified "
                               "(only a root agent can do that)")
    if result.exit_code != ExitCode.OK:
        try:
            meaning = ExitCode(result.exit_code).name
        except ValueError:
            meaning = "unexpected"
        raise VerifierError(f"{name} exited with code {result.exit_code} ({meaning}); "
                            f"output tail:\n{result.text(1500)}")
    if not parse:
        return result, {}
    lines = [line for line in result.stdout.decode("utf-8", "replace").splitlines() if line.strip()]
    try:
        data = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise VerifierError(f"{name} printed no JSON report; output tail:\n{result.text(1500)}")
    return result, data
