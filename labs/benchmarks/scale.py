"""How far one process goes: hundreds of rollouts in flight, orchestrator cost only.

Runs a job of 2 x C rollouts at concurrency C (default C = 100 and 500) through the real
job layer (`Job`, rollouts, ACP client, trajectory and result files, the CLI's progress
display rendering to /dev/null) on the `latency-fake` backend (`latency_fake.py`): create
1.5 s, every exec/upload/download 50 ms, and an in-memory ACP agent streaming 200
updates per turn over 2 s (`--turn-sec 0`: all at once, the worst case). Nothing but benchflow uses the CPU, so the figures are its own:

- peak RSS per in-flight rollout (target <= 2 MB): (peak RSS - RSS before) / C;
- event-loop lag p99 (target <= 100 ms): a task sleeping 10 ms, how late it wakes;
- open file descriptors at the peak and after the job (no leak: back to the start);
- wall time against the ideal: the simulated latency of one rollout x ceil(N / C);
- garbage collection: full (generation 2) collections and their longest pause, which
  grows with the objects of every rollout in flight and shows up in the lag's tail.

    python labs/benchmarks/scale.py [--concurrency 100 500] [--per-slot 2] [--updates 200]
                                    [--turn-sec 2]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console

sys.path.insert(0, str(Path(__file__).parent))

from latency_fake import BenchAcpDriver, Latency, LatencyProvider  # noqa: E402

from benchflow.cli.jobs import MetricsProgress  # noqa: E402
from benchflow.config import RolloutConfig, Scene  # noqa: E402
from benchflow.job.config import MetricConfig  # noqa: E402
from benchflow.job.job import Job, PlannedRollout  # noqa: E402
from benchflow.job.loop import has_uvloop, run_job_loop  # noqa: E402
from benchflow.sandbox.registry import register_provider  # noqa: E402
from benchflow.task import load_task  # noqa: E402

TASK = Path(__file__).resolve().parents[2] / "tasks" / "hello-world"
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class GcPauses:
    """Full garbage collections during the run: how many, the longest pause, and when
    (seconds after the run started)."""

    def __init__(self) -> None:
        self.full = 0
        self.longest = 0.0
        self.at: list[float] = []
        self._started = 0.0
        self._entered = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif info["generation"] == 2:
            self.full += 1
            self.longest = max(self.longest, time.perf_counter() - self._started)
            self.at.append(self._started - self._entered)

    def __enter__(self) -> GcPauses:
        self._entered = time.perf_counter()
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


class Sampler:
    """Event-loop lag sampled every 10 ms while the job runs; RSS and fds every 100 ms
    (reading /proc costs the loop too: listing 1,500 fds 100 times a second would be
    the benchmark's own load, not benchflow's)."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self.peak_rss = 0
        self.peak_fds = 0

    async def run(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(0.01)
            self.lags.append(time.perf_counter() - before - 0.01)
            if len(self.lags) % 10 == 1:
                self.peak_rss = max(self.peak_rss, rss_bytes())
                self.peak_fds = max(self.peak_fds, open_fds())


async def one_run(concurrency: int, n: int, jobs_dir: Path, updates: int,
                  turn_sec: float) -> dict[str, Any]:
    task = load_task(TASK)
    driver = BenchAcpDriver()
    # the fake keeps no files: nothing to record per turn (its processes are all agents)
    config = RolloutConfig(task_path=TASK, scenes=[Scene.single(agent="bench-acp")],
                           environment="latency-fake", harden=False, workspace_changes=False)
    trials = [PlannedRollout(config, task, drivers={"bench-acp": driver}) for _ in range(n)]
    # n attempts of one task: distinct trial folders
    trials = [PlannedRollout(t.config.model_copy(update={"attempt": i + 1}), task, t.drivers)
              for i, t in enumerate(trials)]
    Latency.total, Latency.calls = 0.0, 0
    LatencyProvider.updates, LatencyProvider.turn_sec = updates, turn_sec
    gc.collect()
    rss0, fds0 = rss_bytes(), open_fds()
    sampler = Sampler()
    console = Console(file=open(os.devnull, "w"), force_terminal=True, width=120)
    metrics = [MetricConfig(type="mean"), MetricConfig(type="sum")]
    started, cpu0, loop0 = time.perf_counter(), time.process_time(), time.thread_time()
    with GcPauses() as pauses:
        async with anyio.create_task_group() as agents:
            LatencyProvider.tg = agents
            async with anyio.create_task_group() as tg:
                tg.start_soon(sampler.run)
                with MetricsProgress(console, n, f"scale {concurrency}", metrics) as progress:
                    job = Job(f"scale-{concurrency}", jobs_dir, trials,
                              concurrency=concurrency, listener=progress)
                    result = await job.run()
                tg.cancel_scope.cancel()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
    loop_cpu = time.thread_time() - loop0  # this thread runs the event loop
    console.file.close()
    gc.collect()
    per_rollout = Latency.total / n
    ideal = per_rollout * math.ceil(n / concurrency)
    lags = sorted(sampler.lags)
    errors = sum(1 for r in job.results if r.error is not None)
    return {
        "n": n, "completed": result.completed_trials, "errors": errors,
        "rss_per_rollout_mb": (sampler.peak_rss - rss0) / concurrency / 2**20,
        "lag_p99_ms": lags[min(len(lags) - 1, int(len(lags) * 0.99))] * 1000,
        "lag_median_ms": statistics.median(lags) * 1000,
        "fds_before": fds0, "fds_peak": sampler.peak_fds, "fds_after": open_fds(),
        "wall_s": wall, "ideal_s": ideal, "per_rollout_latency_s": per_rollout,
        "cpu_ms_per_rollout": cpu / n * 1000, "loop_cpu_ms_per_rollout": loop_cpu / n * 1000,
        "gc_full": pauses.full, "gc_longest_ms": pauses.longest * 1000,
        "gc_at": ", ".join(f"{t:.1f}" for t in pauses.at) or "-",
    }


def main(concurrencies: list[int], per_slot: int, updates: int, turn_sec: float) -> None:
    register_provider(LatencyProvider)
    print(f"{os.cpu_count()} cores, {'uvloop' if has_uvloop() else 'asyncio'} event loop; "
          f"{updates} ACP updates per turn over {turn_sec:g} s; "
          f"create 1.5 s, round trip 50 ms; {per_slot} rollouts per slot")
    # under the current directory, where `jobs/` would be (not /tmp, often another disk)
    with tempfile.TemporaryDirectory(dir=Path.cwd(), prefix=".scale-jobs-") as tmp:
        # on the loop `benchflow jobs run` uses (uvloop where installed)
        run_job_loop(lambda: one_run(4, 4, Path(tmp) / "warm", updates, 0.0))  # imports, caches
        for c in concurrencies:
            r = run_job_loop(lambda c=c: one_run(c, c * per_slot, Path(tmp), updates, turn_sec))
            print(f"\nconcurrency {c}: {r['n']} rollouts, {r['completed']} scored, "
                  f"{r['errors']} errors")
            print(f"  peak RSS per in-flight rollout: {r['rss_per_rollout_mb']:.2f} MB "
                  f"(target <= 2 MB)")
            print(f"  event-loop lag p99: {r['lag_p99_ms']:.1f} ms (median "
                  f"{r['lag_median_ms']:.1f} ms; target <= 100 ms)")
            print(f"  open fds: {r['fds_before']} before, {r['fds_peak']} at the peak, "
                  f"{r['fds_after']} after")
            print(f"  wall {r['wall_s']:.1f} s vs ideal {r['ideal_s']:.1f} s "
                  f"({r['wall_s'] / r['ideal_s']:.2f}x; one rollout waits "
                  f"{r['per_rollout_latency_s']:.2f} s on the backend)")
            print(f"  orchestrator CPU: {r['cpu_ms_per_rollout']:.1f} ms per rollout (event loop "
                  f"{r['loop_cpu_ms_per_rollout']:.1f} ms, other threads "
                  f"{r['cpu_ms_per_rollout'] - r['loop_cpu_ms_per_rollout']:.1f} ms); "
                  f"load average {os.getloadavg()[0]:.1f}")
            print(f"  garbage collection: {r['gc_full']} full collections (at {r['gc_at']} s), "
                  f"longest pause {r['gc_longest_ms']:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--per-slot", type=int, default=2)
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--turn-sec", type=float, default=2.0,
                        help="how long each agent turn streams its updates (0: all at once)")
    args = parser.parse_args()
    main(args.concurrency, args.per_slot, args.updates, args.turn_sec)
