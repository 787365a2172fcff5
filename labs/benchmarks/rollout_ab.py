"""A/B of the in-process oracle rollout: this checkout against another, run one by one.

On a shared machine the load swings within a minute, so whole benchmark runs of each side
(`rollout_overhead.py`) compare different minutes. Here each side keeps one worker process
(its own checkout's venv and `benchflow`), and the two take turns, one rollout at a time
(order alternating), each rollout followed by a bare floor run (`docker_floor.py`): a
pair's two rollouts see nearly the same load, and each ratio is against a floor measured
next to it. Prints each rollout, then per side the medians and the median of the ratios.

    python labs/benchmarks/rollout_ab.py OTHER_CHECKOUT [--harden] [--pairs 12]

OTHER_CHECKOUT needs its own `.venv` (e.g. `git worktree add --detach /tmp/main main`,
then `make install` there).
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASK = HERE.parents[1] / "tasks" / "hello-world"


async def _worker(harden: bool) -> None:
    """One rollout and one floor run per line read on stdin; their times on stdout."""
    import anyio
    import docker

    sys.path.insert(0, str(HERE))  # the same floor for both sides
    from docker_floor import floor_once

    from benchflow import RolloutConfig, Scene
    from benchflow.rollout import Rollout
    from benchflow.sandbox.docker import DockerSandbox
    from benchflow.sandbox.spec import SandboxSpec

    client = docker.from_env()
    image = await DockerSandbox(SandboxSpec(name=TASK.name, environment_dir=TASK / "environment")
                                ).prepare_image()
    with tempfile.TemporaryDirectory() as tmp:
        for attempt, _ in enumerate(itertools.chain([None], sys.stdin)):  # a warm-up first
            config = RolloutConfig(task_path=TASK, scenes=[Scene.single(agent="oracle")],
                                   jobs_dir=Path(tmp), job_name="ab", attempt=attempt + 1,
                                   harden=harden or None)
            started = time.perf_counter()
            result = await Rollout(config).run()
            wall = time.perf_counter() - started
            assert result.reward == 1.0, result.error
            floor = await anyio.to_thread.run_sync(floor_once, client, image, TASK)
            print(json.dumps({"ours": wall, "floor": floor}), flush=True)


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def main(other: Path, harden: bool, pairs: int) -> None:
    sides = {"other": other.resolve(), "this": HERE.parents[1]}
    workers = {name: subprocess.Popen(
        [str(root / ".venv" / "bin" / "python"), __file__, "--worker"] + (["--harden"] * harden),
        cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for name, root in sides.items()}
    for worker in workers.values():  # the warm-up's line
        assert worker.stdout is not None and worker.stdout.readline()
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in workers}
    loads = []
    for i in range(pairs):
        for name in (("other", "this") if i % 2 == 0 else ("this", "other")):
            worker = workers[name]
            assert worker.stdin is not None and worker.stdout is not None
            loads.append(_load())
            worker.stdin.write("go\n")
            worker.stdin.flush()
            run = json.loads(worker.stdout.readline())
            runs[name].append(run)
            print(f"{i:3} {name:5} load {loads[-1]:5.2f}  ours {run['ours'] * 1000:5.0f} ms  "
                  f"floor {run['floor'] * 1000:5.0f} ms  {run['ours'] / run['floor']:.2f}x",
                  flush=True)
    for worker in workers.values():
        assert worker.stdin is not None
        worker.stdin.close()
        worker.wait()
    label = "hardened" if harden else "plain"
    print(f"{label} oracle rollout, {pairs} pairs, load (1 min) {min(loads):.1f}-{max(loads):.1f}")
    for name, root in sides.items():
        ours = statistics.median(r["ours"] for r in runs[name])
        floor = statistics.median(r["floor"] for r in runs[name])
        ratios = sorted(r["ours"] / r["floor"] for r in runs[name])
        print(f"  {name} ({root}): {ours * 1000:.0f} ms against {floor * 1000:.0f} ms; "
              f"median ratio {statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, nargs="?")
    parser.add_argument("--harden", action="store_true")
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        import anyio

        anyio.run(_worker, args.harden)
    elif args.other is None:
        parser.error("OTHER_CHECKOUT is required")
    else:
        main(args.other, args.harden, args.pairs)
