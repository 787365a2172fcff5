"""Python calls per rollout on the event loop's thread (deterministic, unlike its CPU time).

Runs `scale.py`'s job (the real job layer on the `latency-fake` backend: 200 ACP updates a
turn over 2 s) at C rollouts in flight, after a warm-up job of 4, with cProfile on the
loop's thread only (worker threads are not profiled), and prints the calls per rollout,
those the updates make (the same run with `--updates 0` subtracted, when asked) and the
functions called most. On a machine shared with other work this count, not the CPU time,
is the figure to compare between two commits (`PYTHONPATH=<other tree>` runs another).

    python labs/benchmarks/loop_calls.py [--concurrency 300] [--updates 200] [--top 25]
                                         [--without-updates]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import scale  # noqa: E402
from latency_fake import LatencyProvider  # noqa: E402

from benchflow.job.loop import run_job_loop  # noqa: E402
from benchflow.sandbox.registry import register_provider  # noqa: E402


def calls_per_rollout(concurrency: int, updates: int, jobs: Path) -> tuple[float, pstats.Stats]:
    """cProfile's count of calls on the loop's thread during one job, per rollout."""
    profile = cProfile.Profile()

    async def profiled() -> dict[str, object]:
        profile.enable()
        try:
            return await scale.one_run(concurrency, concurrency, jobs, updates, 2.0)
        finally:
            profile.disable()

    figures = run_job_loop(profiled)
    if figures["completed"] != concurrency or figures["errors"]:
        raise SystemExit(f"the job did not complete cleanly: {figures}")
    stats = pstats.Stats(profile)
    rows = stats.stats.values()  # type: ignore[attr-defined]
    return sum(row[1] for row in rows) / concurrency, stats


def main(concurrency: int, updates: int, top: int, without_updates: bool) -> None:
    register_provider(LatencyProvider)
    with tempfile.TemporaryDirectory(dir=Path.cwd(), prefix=".loop-calls-") as tmp:
        run_job_loop(lambda: scale.one_run(4, 4, Path(tmp) / "warm", updates, 0.0))
        calls, stats = calls_per_rollout(concurrency, updates, Path(tmp) / "run")
        print(f"{concurrency} rollouts in flight, {updates} ACP updates a turn: "
              f"{calls:,.0f} Python calls per rollout on the event loop's thread")
        if without_updates:
            fixed, _ = calls_per_rollout(concurrency, 0, Path(tmp) / "fixed")
            print(f"  without updates: {fixed:,.0f}; the updates' share: {calls - fixed:,.0f} "
                  f"({(calls - fixed) / max(1, updates):.1f} a update)")
    rows = sorted(stats.stats.items(), key=lambda kv: -kv[1][1])  # type: ignore[attr-defined]
    print(f"\n{'calls/rollout':>13}  function")
    for (file, line, name), (_, ncalls, *_rest) in rows[:top]:
        where = "/".join(Path(file).parts[-2:]) if file != "~" else "builtin"
        print(f"{ncalls / concurrency:13.1f}  {where}:{line} {name}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, default=300)
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--without-updates", action="store_true",
                        help="also run without updates, to split the count")
    args = parser.parse_args()
    main(args.concurrency, args.updates, args.top, args.without_updates)
