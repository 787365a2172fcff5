"""What a rollout in flight keeps alive, in objects the garbage collector tracks.

A full collection walks all of them, so with hundreds of rollouts in flight this count
(deterministic, unlike timings) sets the event loop's worst pauses. Measured on CPython
3.11 with 30 in flight (more per rollout than at 500: fewer rollouts share the process's
fixed objects): 605 before the agent process kept one task less and the rollout logs
shared one formatter, 574 after; 670 once roles kept their sessions for the whole scene
(a session pool and a task group per rollout) and usage was counted per role; 550 once
the ACP client's router was one object per connection instead of eleven closures
(`acp/router.py`) and the phase wrappers and session pool kept no closures or exit stacks;
about 445 (440 against 559 for main when run outside pytest, warm-up and 30) once a
prompt's limits were a loop timer instead of a watcher task (`acp/prompt_watch.py`), the
agent's exit was waited for when asked instead of by a task per agent, the session pool
handed steps over without a memory stream, and the ACP session's task group, the agent
phase's backstop and the disk watchdog kept no generator, context manager or closure
cells alive. The bound sits just above, so keeping more alive per rollout fails it. `labs/benchmarks/live_objects.py` prints the breakdown by type.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.sandbox import registry

pytestmark = pytest.mark.anyio

BENCH = Path(__file__).resolve().parents[3] / "labs" / "benchmarks"
MAX_OBJECTS_PER_ROLLOUT = 475


async def test_tracked_objects_per_rollout_in_flight_stay_bounded(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import latency_fake
    import live_objects

    monkeypatch.setitem(registry._REGISTERED, "latency-fake", latency_fake.LatencyProvider)
    for name in ("CREATE_SEC", "RTT_SEC"):
        monkeypatch.setattr(latency_fake, name, getattr(latency_fake, name))
    await live_objects.live_objects(4, tmp_path / "warm", updates=40)  # imports and caches
    figures = await live_objects.live_objects(30, tmp_path / "run", updates=40)
    assert figures["completed"] == 30
    assert 100 < figures["per_rollout"] <= MAX_OBJECTS_PER_ROLLOUT, figures["by_type"]
