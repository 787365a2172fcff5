"""A/B of the hardened path's in-sandbox work: this checkout's hardened execs against
another's, replayed in one sandbox.

Each checkout runs one hardened hello-world oracle rollout in a worker process of its own
(its own venv and `benchflow`) and hands back the argv, user, cwd and environment of each
exec it made. This process then starts one hello-world sandbox and replays each side's
execs in turn (order alternating): main's baseline, solve.sh, harden and test.sh's exec,
or the fold's (baseline, solve.sh and harden in one exec, `verify/fold.py`) and test.sh's;
each side's harden given the digest its own baseline printed: the same container, the same
minute, no container start or removal in the numbers. Prints each side's execs, the
medians per exec and of the sum, and the paired difference of the sums.

    python labs/benchmarks/hardened_execs_ab.py OTHER_CHECKOUT [--rounds 20]

OTHER_CHECKOUT needs its own `.venv` (as for `rollout_ab.py`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TASK = HERE.parents[1] / "tasks" / "hello-world"


async def _capture() -> None:
    """One hardened rollout; each exec's argv, user, cwd, env and timeout as JSON on stdout."""
    import benchflow.sandbox.docker.sandbox as docker_backend
    from benchflow import RolloutConfig, Scene
    from benchflow.rollout import Rollout

    seen: list[dict[str, Any]] = []
    real = docker_backend.DockerSandbox.exec_into

    async def exec_into(self: Any, cmd: Any, capture: Any, **kwargs: Any) -> Any:
        seen.append({"argv": list(cmd), **{k: kwargs.get(k) for k in
                                           ("user", "cwd", "env", "timeout")}})
        return await real(self, cmd, capture, **kwargs)

    docker_backend.DockerSandbox.exec_into = exec_into  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        config = RolloutConfig(task_path=TASK, scenes=[Scene.single(agent="oracle")],
                               jobs_dir=Path(tmp), job_name="execs-ab", harden=True)
        result = await Rollout(config).run()
    assert result.reward == 1.0, result.error
    for exec_ in seen:
        exec_["name"] = _name(exec_["argv"])
    print(json.dumps(seen))


def _name(argv: list[str]) -> str:
    """baseline, harden, fold (all three in the oracle's exec), solve or test."""
    if "-c" in argv and argv.index("-c") + 2 < len(argv):
        name = argv[argv.index("-c") + 2]
        if name in ("baseline", "harden", "fold"):
            return name
    return "test" if any(a.endswith("test.sh") for a in argv) else "solve"


def _load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


async def _replay(sides: dict[str, list[dict[str, Any]]], rounds: int) -> None:
    from benchflow.sandbox.docker import DockerSandbox
    from benchflow.sandbox.spec import SandboxSpec

    async def timed(exec_: dict[str, Any], argv: list[str] | None = None) -> tuple[float, Any]:
        started = time.perf_counter()
        result = await sandbox.exec(argv or exec_["argv"], user=exec_["user"], cwd=exec_["cwd"],
                                    env=exec_["env"], timeout=exec_["timeout"])
        assert result.exit_code == 0, result.text(500)
        return time.perf_counter() - started, result

    sandbox = DockerSandbox(SandboxSpec(name=TASK.name, environment_dir=TASK / "environment"))
    await sandbox.prepare_image()
    await sandbox.start()
    times: dict[str, list[list[float]]] = {s: [[] for _ in sides[s]] for s in sides}
    empty, loads = [], []
    try:
        await sandbox.exec(["sh", "-c", "mkdir -p /logs/verifier /logs/agent"], user="root")
        await sandbox.upload(TASK / "oracle", "/oracle")  # solve.sh, as the start places it
        for i in range(rounds):
            loads.append(_load())
            empty.append((await timed({"argv": ["true"], "user": "root", "cwd": None,
                                       "env": None, "timeout": 60}))[0])
            for name in (("other", "this") if i % 2 == 0 else ("this", "other")):
                digest = None
                for k, exec_ in enumerate(sides[name]):
                    argv = list(exec_["argv"])
                    if exec_["name"] == "harden":  # the digest its own baseline printed
                        argv[argv.index(exec_["digest"])] = digest
                    took, result = await timed(exec_, argv)
                    if exec_["name"] == "baseline":
                        digest = json.loads(result.stdout.decode().splitlines()[-1])["digest"]
                    times[name][k].append(took)
    finally:
        await sandbox.stop(delete=True)
    print(f"{rounds} rounds, load (1 min) {min(loads):.1f}-{max(loads):.1f}; "
          f"an empty exec {statistics.median(empty) * 1000:.1f} ms")
    sums = {s: [sum(t) for t in zip(*times[s])] for s in sides}
    for name in ("other", "this"):
        execs = "  ".join(f"{e['name']} {statistics.median(t) * 1000:.1f}"
                          for e, t in zip(sides[name], times[name]))
        print(f"  {name:5} {len(sides[name])} execs, ms: {execs}; sum "
              f"{statistics.median(sums[name]) * 1000:.1f}")
    diffs = sorted((b - a) * 1000 for a, b in zip(sums["other"], sums["this"]))
    print(f"  paired sum this - other {statistics.median(diffs):+.1f} ms (quartiles "
          f"{diffs[len(diffs) // 4]:+.1f}, {diffs[3 * len(diffs) // 4]:+.1f})")


def main(other: Path, rounds: int) -> None:
    import anyio

    sides = {}
    for name, root in {"other": other.resolve(), "this": HERE.parents[1]}.items():
        out = subprocess.run([str(root / ".venv" / "bin" / "python"), __file__, "--capture"],
                             cwd=root, capture_output=True, text=True, check=True)
        sides[name] = json.loads(out.stdout.splitlines()[-1])
        for exec_ in sides[name]:  # the digest harden.sh was given: after BASE
            if exec_["name"] == "harden":
                exec_["digest"] = exec_["argv"][exec_["argv"].index("harden") + 2]
    anyio.run(_replay, sides, rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, nargs="?")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--capture", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.capture:
        import anyio

        anyio.run(_capture)
    elif args.other is None:
        parser.error("OTHER_CHECKOUT is required")
    else:
        main(args.other, args.rounds)
