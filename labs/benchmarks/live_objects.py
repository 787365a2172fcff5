"""Objects the garbage collector tracks per rollout in flight (deterministic, unlike timings).

A full collection walks every tracked object, so with hundreds of rollouts in flight its
pause (the event loop's lag tail) grows with what each rollout keeps alive. This runs a
job of N rollouts at concurrency N through the real job layer on the `latency-fake`
backend (`latency_fake.py`, latencies cut to 1-10 ms: only the state matters), holds every
agent half-way through its turn (`latency_fake.Park`), and counts `gc.get_objects()`
against the count before the job: (during - before) / N. It prints the total and the
types that account for most of it (the fake agent's own objects included: its streams and
task, a few dozen).

    python labs/benchmarks/live_objects.py [--rollouts 200] [--updates 200] [--top 25]
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

import latency_fake  # noqa: E402
from latency_fake import BenchAcpDriver, LatencyProvider, Park  # noqa: E402

from benchflow.config import RolloutConfig, Scene  # noqa: E402
from benchflow.job.job import Job, PlannedRollout  # noqa: E402
from benchflow.sandbox.registry import register_provider  # noqa: E402
from benchflow.task import load_task  # noqa: E402

TASK = Path(__file__).resolve().parents[2] / "tasks" / "hello-world"


def _types() -> Counter[str]:
    return Counter(type(o).__qualname__ for o in gc.get_objects())


async def live_objects(n: int, jobs_dir: Path, updates: int = 200) -> dict[str, Any]:
    """Run n rollouts at once; at the moment all are mid-turn, the tracked objects per
    rollout (`per_rollout`) and the per-type difference (`by_type`, per rollout)."""
    register_provider(LatencyProvider)
    latency_fake.CREATE_SEC, latency_fake.RTT_SEC = 0.01, 0.001
    task = load_task(TASK)
    driver = BenchAcpDriver()
    config = RolloutConfig(task_path=TASK, scenes=[Scene.single(agent="bench-acp")],
                           environment="latency-fake", harden=False, workspace_changes=False)
    trials = [PlannedRollout(config.model_copy(update={"attempt": i + 1}), task, {"bench-acp": driver})
                    for i in range(n)]
    park = Park(n)
    LatencyProvider.updates, LatencyProvider.turn_sec, LatencyProvider.park = updates, 0.0, park
    figures: dict[str, Any] = {}
    try:
        async with anyio.create_task_group() as agents:
            LatencyProvider.tg = agents
            gc.collect()
            gc.freeze()  # what exists now is not counted (a job would freeze it too)
            before, types_before = len(gc.get_objects()), _types()
            async with anyio.create_task_group() as tg:
                job = Job(f"objects-{n}", jobs_dir, trials, concurrency=n)
                tg.start_soon(job.run)
                await park.arrived.wait()
                gc.collect()
                during, types_during = len(gc.get_objects()), _types()
                park.release.set()
            figures["completed"] = sum(1 for r in job.results if r.error is None)
    finally:
        gc.unfreeze()
        LatencyProvider.park = LatencyProvider.tg = None
    diff = types_during.copy()
    diff.subtract(types_before)
    figures.update(n=n, before=before, during=during, per_rollout=(during - before) / n,
                   by_type={k: v / n for k, v in diff.most_common() if v > 0})
    return figures


async def main(n: int, updates: int, top: int) -> None:
    with tempfile.TemporaryDirectory(dir=Path.cwd(), prefix=".objects-jobs-") as tmp:
        await live_objects(4, Path(tmp) / "warm", updates)  # imports and caches first
        r = await live_objects(n, Path(tmp), updates)
    print(f"{r['n']} rollouts in flight ({r['completed']} completed without error): "
          f"{r['during'] - r['before']} more tracked objects than before the job, "
          f"{r['per_rollout']:.0f} per rollout")
    print(f"\n{'type':<40} per rollout")
    for name, count in list(r["by_type"].items())[:top]:
        print(f"{name:<40} {count:8.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    anyio.run(main, args.rollouts, args.updates, args.top)
