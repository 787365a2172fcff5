"""CLI overhead, as a user sees it: whole processes, not in-process medians.

Measures, in one run (image cached after a warm-up):

- `benchflow --version` (target <= 0.3 s);
- `benchflow run tasks/hello-world -a oracle`, against a bare floor: a Python process
  making the Docker calls such a run makes, through the SDK, and nothing else (target
  <= 1.5x):

  | step | benchflow run | floor |
  |---|---|---|
  | client | `docker.from_env()` (pings the daemon) | the same |
  | sandbox | create (the task's CPU and memory), start | the same |
  | start upload | `/logs` folders and the oracle's `solve.sh`, one archive | the same |
  | agent | `bash /oracle/solve.sh` in `/app` | the same |
  | verifier | the task's `verifier/` copied to `/tests`, `bash /tests/test.sh` | the same |
  | results | `/logs` copied out, the reward read | the same |
  | teardown | remove, forced | the same |

  What the floor leaves out is benchflow's own: reading the task and job config, checking
  that the image exists, a probe for storage quotas, writing the job's files and the
  trajectory, the summary.

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

FLOOR = r'''
import io, sys, tarfile
from pathlib import Path
import docker

image, task = sys.argv[1], Path(sys.argv[2])


def archive(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.mode = mode
            if data is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


client = docker.from_env()
container = client.containers.create(image, ["sleep", "infinity"], init=True, detach=True,
                                      nano_cpus=10**9, mem_limit="512m",
                                      labels={"benchflow.managed": "true",
                                              "benchflow.job": "bench-cli-floor"})
container.start()
container.put_archive("/", archive([
    ("logs/agent", None, 0o777), ("logs/verifier", None, 0o700),
    ("oracle/solve.sh", (task / "oracle" / "solve.sh").read_bytes(), 0o755)]))
container.exec_run(["bash", "/oracle/solve.sh"], workdir="/app")
container.put_archive("/", archive([(f"tests/{p.name}", p.read_bytes(), 0o755)
                                    for p in (task / "verifier").iterdir()]))
container.exec_run(["bash", "/tests/test.sh"], workdir="/app")
stream, _ = container.get_archive("/logs")
with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
    reward = tar.extractfile("logs/verifier/reward.txt").read().decode().strip()
container.remove(force=True, v=True)
assert reward == "1", reward
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
        floor = [sys.executable, "-c", FLOOR, image, str(TASK)]
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
          f"ratios: {paired:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=11)
    main(parser.parse_args().runs)
