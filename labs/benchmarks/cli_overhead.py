"""CLI overhead, as a user sees it: whole processes, not in-process medians.

Measures, in one run (image cached after a warm-up):

- `benchflow --version` (target <= 0.3 s);
- `benchflow run tasks/hello-world -a oracle`, against a bare floor: `docker_floor.py` as a
  whole Python process, which makes the Docker calls such a run makes through the SDK and
  nothing else (target <= 1.3x).

Prints the medians, their ratio and the median of the back-to-back ratios.

    python labs/benchmarks/cli_overhead.py [--runs 11]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

from benchflow.sandbox.docker import DockerSandbox
from benchflow.sandbox.spec import SandboxSpec
from benchflow.settings import get_settings

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tasks" / "hello-world"
BENCHFLOW = Path(sys.executable).parent / "benchflow"

FLOOR = Path(__file__).with_name("docker_floor.py")


def timed(argv: list[str], cwd: Path | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return wall


def main(runs: int) -> None:
    spec = SandboxSpec(name=TASK.name, environment_dir=TASK / "environment",
                       extra_ca_certs=get_settings().extra_ca_certs)
    image = anyio.run(DockerSandbox(spec).prepare_image)
    with tempfile.TemporaryDirectory() as tmp:
        run = [str(BENCHFLOW), "run", str(TASK), "-a", "oracle", "--jobs-dir", tmp]
        floor = [sys.executable, str(FLOOR), image, str(TASK)]
        timed(run)  # warm-up: the image and the agent-free path are cached
        timed(floor)
        versions = [timed([str(BENCHFLOW), "--version"]) for _ in range(runs)]
        runs_ms, floors = [], []
        for _ in range(runs):
            runs_ms.append(timed(run))
            floors.append(timed(floor))
    version, ours, bare = (statistics.median(v) for v in (versions, runs_ms, floors))
    print(f"benchflow --version, median of {runs}:                        "
          f"{version * 1000:6.0f} ms (target <= 300 ms)")
    print(f"benchflow run tasks/hello-world -a oracle, median of {runs}:  {ours * 1000:6.0f} ms")
    print(f"same Docker steps bare through the SDK (python), median of {runs}: "
          f"{bare * 1000:6.0f} ms")
    # each run and its floor ran back to back: their ratio cancels the machine's drift,
    # which on a shared VM moves both by 10-20% from one minute to the next
    paired = statistics.median(r / f for r, f in zip(runs_ms, floors))
    print(f"ratio of the medians: {ours / bare:.2f}x; median of the {runs} back-to-back "
          f"ratios: {paired:.2f}x (target <= 1.3x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=11)
    main(parser.parse_args().runs)
