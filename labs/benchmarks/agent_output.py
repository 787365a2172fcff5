"""Agent output through benchflow's docker exec, against `cat` through the same exec.

An agent that prints a lot used to be timed out for it: the Docker SDK's demultiplexer
re-concatenated the output frame by frame (8/16/32 MiB took 0.5/2.3/10.1 s). benchflow now
reads the stream frame by frame into `OutputCapture` (files get every byte as it arrives,
memory keeps a tail). This prints, for each size, the seconds of:

  floor     `docker exec CONTAINER cat FILE > /dev/null` (the docker CLI)
  capture   `DockerSandbox.exec_into(["cat", FILE], OutputCapture(files))` (agents' path)
  exec      `DockerSandbox.exec(["cat", FILE])` (memory only, tail kept)
  sdk       the SDK's `exec_start(demux=True)` (the old path; only up to --old-max MiB)

and the ratio capture / floor (the target: at most 2). One container on the local daemon,
labelled and removed at the end.

    python labs/benchmarks/agent_output.py [--sizes 8,64,256,1024] [--old-max 32]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchflow.sandbox.docker import DockerSandbox  # noqa: E402
from benchflow.sandbox.docker.errors import docker_client  # noqa: E402
from benchflow.sandbox.output import OutputCapture  # noqa: E402
from benchflow.sandbox.spec import SandboxSpec  # noqa: E402


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


async def _main(sizes: list[int], old_max: int) -> None:
    sandbox = DockerSandbox(SandboxSpec(name="agent-output-bench", docker_image="debian:bookworm-slim",
                                        storage_mb=None, extra_ca_certs=(),
                                        labels={"benchflow.job": "bench-agent-output"}))
    await sandbox.start()
    try:
        print(f"{'MiB':>6} {'floor s':>8} {'capture s':>10} {'exec s':>8} {'sdk s':>8} "
              f"{'capture/floor':>14}")
        for mib in sizes:
            file = f"/tmp/out-{mib}"
            await sandbox.exec(["sh", "-c", f"head -c {mib << 20} /dev/zero | tr '\\0' a > {file}"])
            floor = _timed(lambda: subprocess.run(
                ["docker", "exec", sandbox.container_id, "cat", file],
                stdout=subprocess.DEVNULL, check=True))
            with tempfile.TemporaryDirectory() as tmp:
                capture = OutputCapture(Path(tmp) / "stdout.txt", Path(tmp) / "stderr.txt", 1 << 20)
                started = time.perf_counter()
                result = await sandbox.exec_into(["cat", file], capture)
                capture.close()
                captured = time.perf_counter() - started
                assert (Path(tmp) / "stdout.txt").stat().st_size == mib << 20, "output lost"
            started = time.perf_counter()
            result = await sandbox.exec(["cat", file])
            plain = time.perf_counter() - started
            assert result.exit_code == 0
            old = "-"
            if mib <= old_max:
                api = docker_client().api

                def sdk() -> None:
                    exec_id = api.exec_create(sandbox.container_id, ["cat", file])["Id"]
                    api.exec_start(exec_id, demux=True)

                old = f"{_timed(sdk):8.2f}"
            await sandbox.exec(["rm", "-f", file])
            print(f"{mib:>6} {floor:>8.2f} {captured:>10.2f} {plain:>8.2f} {old:>8} "
                  f"{captured / floor:>14.2f}", flush=True)
    finally:
        await sandbox.stop(delete=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8,32,256,1024", help="MiB, comma-separated")
    parser.add_argument("--old-max", type=int, default=32, help="largest MiB for the old path")
    args = parser.parse_args()
    anyio.run(_main, [int(s) for s in args.sizes.split(",")], args.old_max)


if __name__ == "__main__":
    main()
