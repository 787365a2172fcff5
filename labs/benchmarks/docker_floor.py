"""The bare Docker floor of a one-step oracle rollout, shared by `rollout_overhead.py` (in
process) and `cli_overhead.py` (as a whole process: `python docker_floor.py IMAGE TASK`).

It makes the Docker calls benchflow makes for `tasks/hello-world` with the oracle, through
the SDK, and nothing else:

| step | benchflow | floor |
|---|---|---|
| sandbox | create (the task's CPU and memory), start | the same |
| start upload | `/logs` folders and the oracle's `solve.sh`, one archive | the same |
| agent | `bash /oracle/solve.sh` in `/app` | the same |
| verifier | the task's `verifier/` copied to `/tests`, `bash /tests/test.sh` | the same |
| results | `/logs` copied out, the reward read | the same |
| teardown | remove, forced | the same |

What it leaves out is benchflow's own: reading the task and the job config, checking that
the image exists, a probe for storage quotas, writing the job's files and the trajectory.
"""

from __future__ import annotations

import io
import sys
import tarfile
import time
from pathlib import Path

import docker

# benchflow's tar builder, the one its backends upload with (a pure function: importing it
# loads `benchflow`, `benchflow.sandbox` and `archive`, under 1 ms, nothing else)
from benchflow.sandbox.archive import tar_bytes


def floor_once(client: docker.DockerClient, image: str, task: Path) -> float:
    """One bare rollout of `task` (hello-world's layout) on `image`; its wall time."""
    started = time.perf_counter()
    container = client.containers.create(image, ["sleep", "infinity"], init=True, detach=True,
                                          nano_cpus=10**9, mem_limit="512m",  # as the task asks
                                          labels={"benchflow.managed": "true",
                                                  "benchflow.job": "bench-floor"})
    container.start()
    container.put_archive("/", tar_bytes({
        "logs/agent/": (b"", 0o777), "logs/verifier/": (b"", 0o700),
        "oracle/solve.sh": ((task / "oracle" / "solve.sh").read_bytes(), 0o755)}))
    container.exec_run(["bash", "/oracle/solve.sh"], workdir="/app")
    container.put_archive("/", tar_bytes({f"tests/{p.name}": (p.read_bytes(), 0o755)
                                          for p in (task / "verifier").iterdir()}))
    container.exec_run(["bash", "/tests/test.sh"], workdir="/app")
    stream, _ = container.get_archive("/logs")
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.extractfile("logs/verifier/reward.txt")
        reward = member.read().decode().strip() if member else ""
    container.remove(force=True, v=True)
    if reward != "1":
        raise SystemExit(f"the floor's rollout scored {reward!r}, not 1")
    return time.perf_counter() - started


if __name__ == "__main__":
    floor_once(docker.from_env(), sys.argv[1], Path(sys.argv[2]))
