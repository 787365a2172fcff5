"""CLI overhead, as a user sees it: whole processes, not in-process medians.

Measures, in one run (image cached after a warm-up):

- `benchflow --version` (target <= 0.3 s);
- `benchflow run tasks/hello-world -a oracle`, against a bare floor: a Python process
  doing the same Docker steps through the SDK (create, start, three execs, one copy,
  remove) (target <= 1.5x).

Prints the medians and the ratio.

    python labs/benchmarks/cli_overhead.py [--runs 5]
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

FLOOR = r'''
import io, sys, tarfile
import docker
client = docker.from_env()
container = client.containers.create(sys.argv[1], ["sleep", "infinity"], init=True, detach=True,
                                      labels={"benchflow.managed": "true",
                                              "benchflow.job": "bench-cli-floor"})
container.start()
container.exec_run(["mkdir", "-p", "/logs/agent", "/logs/verifier"])
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w") as tar:
    data = b'#!/bin/bash\necho "Hello, world!" > /app/hello.txt\n'
    info = tarfile.TarInfo("oracle/solve.sh")
    info.size, info.mode = len(data), 0o755
    tar.addfile(info, io.BytesIO(data))
container.put_archive("/", buf.getvalue())
container.exec_run(["bash", "/oracle/solve.sh"])
container.exec_run(["sh", "-c", "cat /app/hello.txt > /logs/verifier/reward.txt"])
container.remove(force=True)
'''


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
        floor = [sys.executable, "-c", FLOOR, image]
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
    print(f"ratio: {ours / bare:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    main(parser.parse_args().runs)
