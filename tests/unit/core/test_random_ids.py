"""Ids and file names drawn from a pool of the OS's random bytes (`trace_ids.random_hex`):
the right shape, never the same bytes twice, and a forked child never repeats its parent."""

from __future__ import annotations

import os
import sys

import pytest

from benchflow import trace_ids
from benchflow.acp.launch import default_env_file_path


def test_ids_have_their_shape_and_never_repeat():
    drawn = [trace_ids.random_hex(16) for _ in range(600)]  # more than one 4 KiB batch
    assert all(len(d) == 32 and int(d, 16) >= 0 for d in drawn)
    assert len(set(drawn)) == len(drawn)
    assert len(trace_ids.random_hex(5000)) == 10000  # more than a batch at once
    assert trace_ids.TRACE_ID.match(trace_ids.new_trace_id())
    assert trace_ids.SPAN_ID.match(trace_ids.new_span_id())
    assert trace_ids.new_run_id().startswith("run_") and len(trace_ids.new_run_id()) == 28
    paths = {default_env_file_path() for _ in range(100)}
    assert len(paths) == 100
    assert all(p.startswith("/tmp/.benchflow-env-") and len(p) == 20 + 32 for p in paths)


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin",
                    reason="fork: Linux")
def test_a_forked_child_does_not_draw_its_parents_bytes():
    trace_ids.random_hex(1)  # the pool holds bytes the child would otherwise inherit
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next draw and leave at once
        os.close(read)
        os.write(write, trace_ids.random_hex(16).encode())
        os._exit(0)
    os.close(write)
    child = b""
    while chunk := os.read(read, 64):
        child += chunk
    os.close(read)
    os.waitpid(pid, 0)
    assert len(child) == 32 and child.decode() != trace_ids.random_hex(16)
