"""Rollout overhead: benchflow's hello-world oracle rollout against the bare Docker floor.

Prints the median wall time of N rollouts (image cached) with each phase's share, and
the median of a floor making the same Docker calls bare through the SDK (`docker_floor.py`).
Targets (issue 30): hardened at most 1.3x the floor, plain at most 1.1x.

    python labs/benchmarks/rollout_overhead.py [--runs 10] [--harden]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import docker
from docker_floor import floor_once

from benchflow import RolloutConfig, Scene
from benchflow.rollout import Rollout
from benchflow.sandbox.docker import DockerSandbox
from benchflow.sandbox.spec import SandboxSpec

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tasks" / "hello-world"
PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")


async def rollout_once(jobs_dir: Path, i: int, harden: bool | None = None
                        ) -> tuple[float, dict[str, float]]:
    config = RolloutConfig(task_path=TASK, scenes=[Scene.single(agent="oracle")],
                           jobs_dir=jobs_dir, job_name="bench", attempt=i + 1, harden=harden)
    started = time.perf_counter()
    result = await Rollout(config).run()
    wall = time.perf_counter() - started
    assert result.reward == 1.0, result.error
    return wall, {p: getattr(result.durations, f"{p}_sec") or 0.0 for p in PHASES}


async def main(runs: int, harden: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        jobs_dir = Path(tmp)
        # warm-up: build the image once, so every measured run uses the cache
        sandbox = DockerSandbox(SandboxSpec(name=TASK.name, environment_dir=TASK / "environment"))
        image = await sandbox.prepare_image()
        await rollout_once(jobs_dir, 999, harden or None)
        client = docker.from_env()
        floor_once(client, image, TASK)

        walls, phases = [], {p: [] for p in PHASES}
        floors = []
        for i in range(runs):
            wall, durations = await rollout_once(jobs_dir, i, harden or None)
            walls.append(wall)
            for p in PHASES:
                phases[p].append(durations[p])
            floors.append(await anyio.to_thread.run_sync(floor_once, client, image, TASK))

    ours, floor = statistics.median(walls), statistics.median(floors)
    label = "hardened verify" if harden else "trusted oracle: plain verify"
    print(f"benchflow hello-world oracle rollout ({label}), median of {runs}: {ours * 1000:.0f} ms")
    for p in PHASES:
        share = statistics.median(phases[p])
        print(f"  {p:<18} {share * 1000:6.0f} ms  {share / ours:5.1%}")
    print(f"bare Docker SDK floor, median of {runs}:          {floor * 1000:.0f} ms")
    print(f"ratio: {ours / floor:.2f}x (target <= {1.3 if harden else 1.1}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--harden", action="store_true",
                        help="force the hardened verify (baseline + harden), as for untrusted agents")
    args = parser.parse_args()
    anyio.run(main, args.runs, args.harden)
