"""The root shell benchflow keeps open between turns (`LiveShell`), on every backend."""

from __future__ import annotations

import pytest

from benchflow.sandbox.live_shell import LiveShell
from tests.conformance.test_sandbox_contract import backend, sandbox  # noqa: F401

pytestmark = [pytest.mark.docker, pytest.mark.anyio]


async def test_commands_run_in_one_shell_with_exit_codes_and_whole_output(sandbox):  # noqa: F811
    shell = LiveShell(sandbox)
    try:
        first = await shell.run(["sh", "-c", "id -un; echo $$ > /tmp/pid-a"], timeout=60)
        assert first is not None and (first.exit_code, first.stdout) == (0, b"root\n")
        failed = await shell.run(["sh", "-c", "echo partial; echo oops >&2; exit 3"],
                                 timeout=60)
        assert failed is not None and (failed.exit_code, failed.stdout) == (3, b"partial\n")
        big = await shell.run(["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' y"],
                              timeout=60)
        assert big is not None and big.stdout == b"y" * 3_000_000  # no newline at the end
        quoted = await shell.run(["printf", "%s|", "a b", "$(id)", "'q'"], timeout=60)
        assert quoted is not None and quoted.stdout == b"a b|$(id)|'q'|"
    finally:
        await shell.aclose()
    assert shell.usable  # closed, not broken: it would start again
