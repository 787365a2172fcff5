"""OutputCapture: every byte to its file as it arrives, only a tail in memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.sandbox.output import STDERR, STDOUT, OutputCapture, exec_captured

from ..job.conftest import Behaviour, FakeSandbox


def test_files_get_everything_memory_keeps_the_tail(tmp_path: Path):
    capture = OutputCapture(tmp_path / "out.txt", tmp_path / "err.txt", memory_limit=10)
    for i in range(1000):
        capture.write(STDOUT, f"{i:04d}\n".encode())
    capture.write(STDERR, b"oops\n")
    capture.close()
    expected = "".join(f"{i:04d}\n" for i in range(1000))
    assert (tmp_path / "out.txt").read_text() == expected
    result = capture.result(0)
    assert result.stdout == expected.encode()[-10:] and result.stderr == b"oops\n"
    assert capture.truncated and capture.total_bytes(STDOUT) == len(expected)


def test_the_files_exist_when_nothing_is_printed(tmp_path: Path):
    OutputCapture(tmp_path / "a" / "out.txt", tmp_path / "a" / "err.txt").close()
    assert (tmp_path / "a" / "out.txt").read_bytes() == b""


def test_memory_stays_within_twice_the_limit(tmp_path: Path):
    capture = OutputCapture(memory_limit=1000)
    for _ in range(10_000):
        capture.write(STDOUT, b"x" * 333)
        assert len(capture._tails[STDOUT].buf) <= 2000 + 333
    assert capture.result(0).stdout == b"x" * 1000


@pytest.mark.anyio
async def test_a_backend_without_streaming_hands_over_the_finished_output(tmp_path: Path):
    sandbox = FakeSandbox(Behaviour())
    capture = OutputCapture(tmp_path / "out.txt", tmp_path / "err.txt")
    result = await exec_captured(sandbox, ["echo", "hi"], capture)
    assert (tmp_path / "out.txt").read_bytes() == result.stdout
