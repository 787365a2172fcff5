"""Does CPU work hide behind Docker's waits? The floor with added pure-Python CPU.

`docker_floor.py`'s rollout spends most of its wall time waiting on the daemon. If that
waiting left the machine's cores idle, CPU a process spends *during* the Docker calls (in
a thread) would cost little wall time, and CPU spent *before* them its full amount: the
premise of starting a sandbox before the rest of the imports. Each round runs three
floor processes (order rotating): plain, with `--cpu-ms` of CPU before the first Docker
call, and with the same CPU in a thread started with the first call. Prints each round
and the median extra wall time of each variant over the plain one.

    python labs/benchmarks/floor_overlap.py [--rounds 10] [--cpu-ms 150]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASK = HERE.parents[1] / "tasks" / "hello-world"
MODES = ("plain", "before", "thread")


def burn(cpu_ms: float) -> None:
    """Pure-Python work (holding the GIL, as imports do) for `cpu_ms` of this thread's CPU."""
    end = time.thread_time() + cpu_ms / 1000
    total = 0
    while time.thread_time() < end:
        for i in range(1000):
            total += i


def floor(image: str, mode: str, cpu_ms: float) -> None:
    """One floor rollout in this process, with the CPU work placed as `mode` says."""
    import docker

    sys.path.insert(0, str(HERE))
    from docker_floor import floor_once

    client = docker.from_env()
    if mode == "before":
        burn(cpu_ms)
    worker = threading.Thread(target=burn, args=(cpu_ms,))
    if mode == "thread":
        worker.start()
    floor_once(client, image, TASK)
    if mode == "thread":
        worker.join()


def main(rounds: int, cpu_ms: float) -> None:
    import anyio

    from benchflow.sandbox.docker import DockerSandbox
    from benchflow.sandbox.spec import SandboxSpec
    from benchflow.settings import get_settings

    spec = SandboxSpec(name=TASK.name, environment_dir=TASK / "environment",
                       extra_ca_certs=get_settings().extra_ca_certs)
    image = anyio.run(DockerSandbox(spec).prepare_image)
    walls: dict[str, list[float]] = {m: [] for m in MODES}
    loads = []
    for r in range(rounds + 1):  # the first round warms up
        loads.append(os.getloadavg()[0])
        for mode in MODES[r % 3:] + MODES[:r % 3]:
            started = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--one", mode, "--image", image,
                            "--cpu-ms", str(cpu_ms)], check=True)
            if r:
                walls[mode].append((time.perf_counter() - started) * 1000)
        if r:
            print(f"round {r:2d} (load {loads[-1]:4.1f}): " +
                  ", ".join(f"{m} {walls[m][-1]:5.0f} ms" for m in MODES), flush=True)
    print(f"load (1 min) {min(loads[1:]):.1f}-{max(loads[1:]):.1f}; plain median "
          f"{statistics.median(walls['plain']):.0f} ms; {cpu_ms:g} ms of CPU added, the "
          "median extra per round:")
    for mode in MODES[1:]:
        extra = statistics.median(w - p for w, p in zip(walls[mode], walls["plain"]))
        print(f"  {mode:6s} {extra:+5.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cpu-ms", type=float, default=150.0)
    parser.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--image", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        floor(args.image, args.one, args.cpu_ms)
    else:
        main(args.rounds, args.cpu_ms)
