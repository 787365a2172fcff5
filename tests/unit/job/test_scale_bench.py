"""The scale benchmark's backend and agent really run rollouts (so its numbers mean
something): every rollout is scored and its trajectory holds the streamed updates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from benchflow.sandbox import registry
from benchflow.trajectory import load

pytestmark = pytest.mark.anyio

BENCH = Path(__file__).resolve().parents[3] / "labs" / "benchmarks"


async def test_a_small_scale_run(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import scale

    monkeypatch.setitem(registry._REGISTERED, "latency-fake", scale.LatencyProvider)
    monkeypatch.setattr("latency_fake.CREATE_SEC", 0.01)
    monkeypatch.setattr("latency_fake.RTT_SEC", 0.001)
    figures = await scale.one_run(3, 6, tmp_path, updates=40, turn_sec=0.05)
    assert figures["completed"] == 6 and figures["errors"] == 0
    assert figures["fds_after"] <= figures["fds_before"]
    trajectories = sorted(tmp_path.glob("scale-3/*/*/*/trajectory/acp_trajectory.jsonl"))
    assert len(trajectories) == 6
    events = load(trajectories[0])
    # 40 updates: 2 tool calls (with their updates), the text chunks as agent messages
    assert sum(e.type == "tool_call" for e in events) == 2
    assert sum(e.type == "tool_call_update" for e in events) == 2
    assert any(e.type == "agent_message" and "chunk 39" in (e.text or "") for e in events)
    assert "scale" in sys.modules
