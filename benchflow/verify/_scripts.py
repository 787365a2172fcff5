"""Run the hardening shell scripts inside a sandbox and read the JSON line they print.

Each script is `common.sh` followed by the script's own text, run as root with
`sh -c TEXT NAME ARGS...`: the text comes from benchflow's package, never from a file in
the sandbox the agent could have edited, and every value travels as an argument.
"""

from __future__ import annotations

import functools
import json
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


async def run_script(sandbox: Sandbox, name: str, *args: str, timeout: float,
                     parse: bool = True, image_path: bool = False
                     ) -> tuple[ExecResult, dict[str, Any]]:
    """Run script `name` as root; return its result and its last stdout line as JSON.

    The exec's PATH is `SYSTEM_PATH`, unless `image_path` (only for the baseline, taken
    before the agent's first turn, which records the image's PATH).

    Raises:
        VerifierTampered: the script found its baseline changed (`BASELINE_TAMPERED`).
        VerifierError: the script failed or printed no JSON.
    """
    env = None if image_path else {"PATH": SYSTEM_PATH}
    result = await sandbox.exec(script_argv(name, *args), user="root", env=env, timeout=timeout)
    if result.timed_out:
        raise VerifierError(f"{name} exceeded its timeout of {timeout:g} s")
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
