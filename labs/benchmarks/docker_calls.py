"""Docker API calls per rollout: what the floor makes, what benchflow makes (deterministic).

On a shared, loaded machine wall-clock ratios swing by 2x from one minute to the next;
the number of round trips to the daemon does not, and each `exec` is the expensive one
(the daemon spawns a process in the container: 50-100 ms idle, 300+ ms under load). This
counts every Docker SDK call benchflow makes (through `sandbox.docker.sandbox.docker_call`) for
one hello-world oracle rollout, plain and hardened, with the execs spelled out, against
the floor of `docker_floor.py` (create, start, 2 uploads, 2 execs, 1 download, remove).

    python labs/benchmarks/docker_calls.py
"""

from __future__ import annotations

import collections
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import benchflow.sandbox.docker.sandbox as docker_backend
from benchflow import RolloutConfig, Scene
from benchflow.rollout import Rollout

TASK = Path(__file__).resolve().parents[2] / "tasks" / "hello-world"
FLOOR = {"create": 1, "start": 1, "put_archive": 2, "exec": 2, "get_archive": 1, "remove": 1}
calls: list[tuple[str, float, Any]] = []
_real_call = docker_backend.docker_call


async def _counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
    started = time.perf_counter()
    try:
        return await _real_call(fn, *args, **kwargs)
    finally:
        name = getattr(fn, "__name__", str(fn))
        calls.append((name, time.perf_counter() - started, args[1] if name == "exec_create" else None))


def _describe(argv: list[str]) -> str:
    """The scripts an exec runs: `sh -c SCRIPT NAME ...` by NAME, chained ones joined."""
    names = []
    for i, word in enumerate(argv):
        if word == "-c" and i + 1 < len(argv):
            if argv[i + 1].startswith(('"${1}"', "m=$1;")):
                continue  # a wrapper running the scripts that follow in its arguments
            name = argv[i + 2] if i + 2 < len(argv) else ""
            plain = name and not name.startswith("/") and " " not in name
            names.append(name if plain and name != "chained" else
                         argv[i + 1].strip().splitlines()[0][:48])
    names = [n for n in names if n != "chained"] or [" ".join(argv)[:60]]
    if any(n.startswith("/") and n.endswith("test.sh") for n in argv):
        names.append("test.sh")
    return " + ".join(dict.fromkeys(names))


async def one(harden: bool, jobs: Path, attempt: int) -> tuple[collections.Counter[str], list[str]]:
    config = RolloutConfig(task_path=TASK, scenes=[Scene.single(agent="oracle")], jobs_dir=jobs,
                           job_name="docker-calls", attempt=attempt, harden=harden)
    calls.clear()
    result = await Rollout(config).run()
    assert result.reward == 1.0, result.error
    kinds = collections.Counter("exec" if n == "exec_create" else n for n, _, _ in calls
                                if n not in ("exec_start", "_pump", "exec_inspect"))
    execs = [_describe([str(a) for a in argv]) for n, _, argv in calls if n == "exec_create"]
    return kinds, execs


async def main() -> None:
    docker_backend.docker_call = _counted  # every call the backend makes goes through it
    with tempfile.TemporaryDirectory() as tmp:
        await one(False, Path(tmp), 99)  # builds or finds the image
        for harden in (False, True):
            kinds, execs = await one(harden, Path(tmp), 1 + harden)
            label = "hardened" if harden else "plain (trusted oracle)"
            total = sum(kinds.values())
            print(f"{label}: {total} Docker calls besides exec start/inspect, "
                  f"{kinds['exec']} execs (floor: {sum(FLOOR.values())} calls, "
                  f"{FLOOR['exec']} execs)")
            print("  " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
            for line in execs:
                print(f"    exec: {line}")


if __name__ == "__main__":
    anyio.run(main)
