"""Job load: 100 trivial trials at concurrency 8, through the whole job machinery.

Runs the oracle on tasks/hello-world 100 times (n_attempts=100) as one job, with
its image built beforehand, then checks that every trial left a result.json and no
container of the job remains. Prints wall time and trials per minute.

    python labs/benchmarks/job_load.py [--trials 100] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio
import docker

from benchflow.job.config import parse_job_config
from benchflow.job.runner import make_job, prepare_job, start_new_job
from benchflow.job.signals import run_with_signals
from benchflow.sandbox.docker import DockerSandbox, preflight
from benchflow.sandbox.spec import SandboxSpec

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tasks" / "hello-world"


async def main(trials: int, concurrency: int) -> None:
    await preflight()
    await DockerSandbox(SandboxSpec(name=TASK.name, environment_dir=TASK / "environment")
                        ).prepare_image()  # warm the image cache: measure trials, not a build
    name = f"job-load-{int(time.time())}"
    with tempfile.TemporaryDirectory() as tmp:
        config = parse_job_config({
            "name": name, "jobs_dir": tmp, "n_attempts": trials,
            "n_concurrent_trials": concurrency, "agents": [{"name": "oracle"}],
            "datasets": [{"path": str(TASK.parent), "tasks": [TASK.name]}]})
        prepared = prepare_job(config)
        start_new_job(prepared)
        started = time.perf_counter()
        result = await run_with_signals(make_job(prepared), "docker")
        wall = time.perf_counter() - started
        files = list((Path(tmp) / name).glob("*/*/*/result.json"))
        left = docker.from_env().containers.list(all=True,
                                                 filters={"label": f"benchflow.job={name}"})
    print(f"{trials} trials at concurrency {concurrency}: wall {wall:.1f} s, "
          f"{trials / wall * 60:.0f} trials/min")
    print(f"result.json files: {len(files)}; completed {result.completed_trials}, "
          f"failed {result.failed_trials}, pass rate {result.pass_rate}")
    print(f"containers left: {len(left)}")
    assert len(files) == trials, f"expected {trials} result.json files, found {len(files)}"
    assert not left, f"containers left behind: {[c.name for c in left]}"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    anyio.run(main, args.trials, args.concurrency)
