"""A/B of the whole-process `benchflow run`: source trees against each other and the floor.

`cli_overhead.py` measures one checkout; on a shared machine whole runs of it compare
different minutes. Here each round runs `docker_floor.py` and `benchflow run
tasks/hello-world -a oracle` from each tree once (the order rotating per round), each
tree first on PYTHONPATH under this venv's Python, as the console script starts it. Per
process it records the wall time and the CPU time (user + system, from `wait4`: the one
number the machine's load barely moves). Prints each round, then per side the medians,
the median of the ratios to the floor of the same round and, for two trees, the median
of their per-round differences.

    python labs/benchmarks/cli_ab.py main=/tmp/main branch=. [--rounds 11]

A tree is a checkout or a `git archive` of one (`git archive main | tar -x -C /tmp/main`);
compile it first (`python -m compileall -q /tmp/main/benchflow`): with
PYTHONDONTWRITEBYTECODE set, an uncompiled tree compiles its modules on every run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TASK = REPO / "tasks" / "hello-world"
# the console script's own lines (`.venv/bin/benchflow`); run with -P, so that the tree given on
# PYTHONPATH, not the current folder, is first on sys.path
LAUNCH = ("import sys\nfrom benchflow.cli.main import main\nsys.argv[0] = 'benchflow'\n"
          "sys.exit(main())")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The wall and CPU milliseconds of one process."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    if status != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{err.decode()[-2000:]}")
    return wall * 1000, (usage.ru_utime + usage.ru_stime) * 1000


def main(trees: dict[str, Path], rounds: int) -> None:
    sys.path.insert(0, str(HERE))
    import anyio

    from benchflow.sandbox.docker import DockerSandbox
    from benchflow.sandbox.spec import SandboxSpec
    from benchflow.settings import get_settings

    spec = SandboxSpec(name=TASK.name, environment_dir=TASK / "environment",
                       extra_ca_certs=get_settings().extra_ca_certs)
    image = anyio.run(DockerSandbox(spec).prepare_image)
    jobs = tempfile.mkdtemp(prefix="cli-ab-")
    commands = {"floor": ([sys.executable, str(HERE / "docker_floor.py"), image, str(TASK)],
                          dict(os.environ))}
    for name, tree in trees.items():
        commands[name] = ([sys.executable, "-P", "-c", LAUNCH, "run", str(TASK), "-a", "oracle",
                           "--jobs-dir", jobs], dict(os.environ, PYTHONPATH=str(tree)))
    for argv, env in commands.values():
        timed(argv, env)  # warm-up: the image, the page cache
    names = list(commands)
    results: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
    loads = []
    for r in range(rounds):
        loads.append(os.getloadavg()[0])
        for name in names[r % len(names):] + names[:r % len(names)]:
            results[name].append(timed(*commands[name]))
        print(f"round {r + 1:2d} (load {loads[-1]:4.1f}): " + ", ".join(
            f"{n} {results[n][-1][0]:5.0f} ms / cpu {results[n][-1][1]:3.0f}" for n in names),
            flush=True)
    print(f"load (1 min) {min(loads):.1f}-{max(loads):.1f}; {rounds} rounds; medians:")
    floor = [wall for wall, _ in results["floor"]]
    for name in names:
        walls, cpus = [w for w, _ in results[name]], [c for _, c in results[name]]
        line = (f"  {name:8s} wall {statistics.median(walls):5.0f} ms, "
                f"cpu {statistics.median(cpus):4.0f} ms")
        if name != "floor":
            ratios = sorted(w / f for w, f in zip(walls, floor))
            line += (f", ratio to the floor {statistics.median(ratios):.2f}x "
                     f"({ratios[0]:.2f}-{ratios[-1]:.2f}x)")
        print(line)
    if len(trees) == 2:
        a, b = trees
        wall = statistics.median(y[0] - x[0] for x, y in zip(results[a], results[b]))
        cpu = statistics.median(y[1] - x[1] for x, y in zip(results[a], results[b]))
        print(f"  {b} - {a}, per round: wall {wall:+.0f} ms, cpu {cpu:+.1f} ms (medians)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", help="NAME=PATH of a source tree")
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    given = dict(t.split("=", 1) for t in args.trees)
    main({name: Path(path).resolve() for name, path in given.items()}, args.rounds)
