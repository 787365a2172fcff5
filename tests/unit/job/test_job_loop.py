"""Jobs run on uvloop where it is installed, on the standard asyncio loop otherwise, and
on the standard loop when only one rollout runs at a time (nothing for uvloop to gain)."""

from __future__ import annotations

import asyncio
import sys

import pytest

from benchflow.job import loop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop is not installed on Windows")
def test_a_job_runs_on_uvloop():
    assert loop.has_uvloop()  # a dependency on Linux and macOS
    assert loop.run_job_loop(_loop_module).startswith("uvloop")


def test_without_uvloop_the_standard_loop_runs(monkeypatch):
    monkeypatch.setattr(loop.importlib.util, "find_spec", lambda name: None)
    assert not loop.has_uvloop()
    assert loop.run_job_loop(_loop_module).startswith("asyncio")


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop is not installed on Windows")
def test_one_rollout_at_a_time_runs_on_the_standard_loop():
    assert loop.run_job_loop(_loop_module, in_flight=1).startswith("asyncio")
    assert loop.run_job_loop(_loop_module, in_flight=2).startswith("uvloop")
    assert loop.run_job_loop(_loop_module, in_flight=None).startswith("uvloop")  # unknown


async def _sniffed() -> tuple[str | None, str]:
    import sniffio

    return sniffio.thread_local.name, sniffio.current_async_library()


def test_during_a_job_the_library_is_named_for_its_thread_and_unnamed_after():
    """AnyIO's look-up of the running library is answered from sniffio's thread-local
    during a job (not by finding the current task each time), and only during it."""
    import sniffio

    assert loop.run_job_loop(_sniffed) == ("asyncio", "asyncio")
    assert loop.run_job_loop(_sniffed, in_flight=1) == ("asyncio", "asyncio")
    assert sniffio.thread_local.name is None

    async def fails() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        loop.run_job_loop(fails)
    assert sniffio.thread_local.name is None
