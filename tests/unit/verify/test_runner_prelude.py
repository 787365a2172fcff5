"""Fewer round trips on the hardened path: test.sh's exec runs a prelude first (the seal),
and scripts chain into one exec (the git scrub before the baseline); a failure stops what
follows. On the host-local sandbox: a real shell, no Docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.errors import VerifierError
from benchflow.sandbox.base import ExecResult
from benchflow.sandbox.exit_codes import ExitCode
from benchflow.verify._scripts import _BEFORE_DONE, chained_argv
from benchflow.verify.runner import (
    INLINE_VERIFIER_MAX,
    VerifierRun,
    run_test_script,
)
from tests.fakes.local_sandbox import LocalSandbox

pytestmark = pytest.mark.anyio


def _verifier(tmp_path: Path) -> VerifierRun:
    mount = tmp_path / "verifier"
    mount.mkdir()
    (mount / "test.sh").write_text("#!/bin/sh\necho ran > \"$MARK\"\necho test output\n")
    return VerifierRun(verifier_dir=mount, mount=str(mount), timeout_sec=60,
                       env={"MARK": str(tmp_path / "ran")}, cwd=str(tmp_path))


async def test_the_prelude_runs_first_in_the_same_exec(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path)
    run = _verifier(tmp_path)
    prelude = ["/bin/sh", "-c", 'echo sealed > "$1"; echo noise', "seal", str(tmp_path / "seal")]
    result = await run_test_script(sandbox, run, tmp_path / "out", reset_logs=False,
                                   before=[prelude])
    assert len(sandbox.calls) == 1  # one exec for both
    assert (tmp_path / "seal").read_text() == "sealed\n"
    assert (tmp_path / "ran").read_text() == "ran\n"
    assert result.stdout == b"test output\n"  # neither the prelude's output nor the marker
    assert (tmp_path / "out" / "stdout.txt").read_bytes() == b"test output\n"


async def test_a_failed_prelude_stops_before_test_sh(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path)
    run = _verifier(tmp_path)
    with pytest.raises(VerifierError, match="exited with code 3") as info:
        await run_test_script(sandbox, run, tmp_path / "out", reset_logs=False,
                              before=[["/bin/sh", "-c", "echo cannot seal >&2; exit 3"]])
    assert "cannot seal" in str(info.value)
    assert not (tmp_path / "ran").exists()


async def test_scripts_chained_into_one_exec_stop_at_the_first_failure(tmp_path: Path) -> None:
    sandbox = LocalSandbox(tmp_path)
    first = ["/bin/sh", "-c", 'echo one > "$1"; echo chatter', "first", str(tmp_path / "one")]
    main = ["/bin/sh", "-c", 'echo "main $1"', "main", "$(id)"]
    done = await sandbox.exec(chained_argv([first], main))
    assert done.ok and (tmp_path / "one").exists()
    assert done.stdout.decode().splitlines() == [_BEFORE_DONE, "main $(id)"]  # values as data
    failing = ["/bin/sh", "-c", "exit 4", "failing"]
    stopped = await sandbox.exec(chained_argv([failing, first], main))
    assert stopped.exit_code == 4 and _BEFORE_DONE.encode() not in stopped.stdout
    assert b"main" not in stopped.stdout
    assert chained_argv([], main) == main


class _Scripted(LocalSandbox):
    """Answers each exec with the next canned result (nothing runs); records uploads."""

    def __init__(self, root: Path, *results: ExecResult) -> None:
        super().__init__(root)
        self.results = list(results)

    async def exec(self, cmd, **kw) -> ExecResult:  # type: ignore[override]
        self.calls.append([str(c) for c in cmd])
        return self.results.pop(0)

    async def upload(self, src: Path, dst: str) -> None:  # type: ignore[override]
        self.uploads.append((dst, 0))


async def test_a_small_verifier_folder_travels_in_test_sh_exec(tmp_path: Path) -> None:
    sandbox = _Scripted(tmp_path, ExecResult(0, _BEFORE_DONE.encode() + b"\nok\n", b""))
    seal = ["/bin/sh", "-c", "true", "seal"]
    result = await run_test_script(sandbox, _verifier(tmp_path), tmp_path / "out",
                                   before=[seal], shell="/bin/sh", carry=True)
    assert result.stdout == b"ok\n"
    assert len(sandbox.calls) == 1 and sandbox.uploads == []
    argv = sandbox.calls[0]
    assert argv[argv.index("unpack") + 1] == str(tmp_path / "verifier")  # MOUNT, then ARCHIVE
    assert argv.index("unpack") < argv.index("seal")  # the folder first, then the seal
    assert argv[0] == "/bin/sh" and argv[argv.index("unpack") - 3] == "/bin/sh"  # as asked


async def test_an_image_without_base64_or_tar_is_left_to_the_upload(tmp_path: Path) -> None:
    ok = ExecResult(0, b"ok\n", b"")
    sandbox = _Scripted(tmp_path, ExecResult(ExitCode.NO_TOOLS, b"", b""), ok)
    result = await run_test_script(sandbox, _verifier(tmp_path), tmp_path / "out", carry=True)
    assert result.stdout == b"ok\n"
    assert len(sandbox.calls) == 2 and len(sandbox.uploads) == 1  # unpacked nothing: uploaded
    assert "unpack" not in sandbox.calls[1]
    (tmp_path / "big").mkdir()
    big = _verifier(tmp_path / "big")
    (big.verifier_dir / "data.bin").write_bytes(b"x" * (INLINE_VERIFIER_MAX + 1))
    sandbox = _Scripted(tmp_path, ok)
    await run_test_script(sandbox, big, tmp_path / "out", carry=True)
    assert len(sandbox.calls) == 1 and len(sandbox.uploads) == 1  # too large: uploaded
    assert "unpack" not in sandbox.calls[0]


async def test_a_failed_unpack_is_not_taken_for_missing_tools(tmp_path: Path) -> None:
    sandbox = _Scripted(tmp_path, ExecResult(2, b"", b"tar: broken archive"))
    with pytest.raises(VerifierError, match="unpack"):
        await run_test_script(sandbox, _verifier(tmp_path), tmp_path / "out", carry=True)
    assert len(sandbox.calls) == 1 and sandbox.uploads == []
