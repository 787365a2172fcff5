"""Exit codes of the shell scripts benchflow runs inside sandboxes.

A script cannot import Python, so each `exit N` in `sandbox/scripts/*.sh` and
`verify/scripts/*.sh` carries a comment naming its member here, and
`tests/unit/verify/test_scripts.py` checks that every code a script uses is listed.
The numbers follow sysexits.h where one fits; 124 and 137 are what `timeout -k`
leaves when `Sandbox.exec` enforces a deadline.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Why an in-sandbox script stopped."""

    OK = 0
    """Done; any data for Python is the last JSON line on stdout."""
    USAGE = 64
    """Bad arguments (a relative path, `/` where a folder is expected, a missing value)."""
    NOT_ROOT = 65
    """The script must run as root and did not."""
    NO_BASELINE = 66
    """harden.sh found no baseline: take_baseline() never ran in this sandbox."""
    BASELINE_TAMPERED = 67
    """The baseline saved before the agent ran no longer has the digest Python recorded."""
    NO_TOOLS = 69
    """unpack.sh: the image has no base64 or tar (the verifier folder is uploaded instead)."""
    TIMEOUT = 124
    """`timeout` stopped the command at its deadline."""
    KILLED = 137
    """The command was killed (SIGKILL), e.g. by `timeout -k` after the grace period."""


TIMEOUT_EXIT_CODES = (ExitCode.TIMEOUT, ExitCode.KILLED)
"""What a command `Sandbox.exec` ran under its deadline leaves when the deadline struck."""

__all__ = ["ExitCode", "TIMEOUT_EXIT_CODES"]
