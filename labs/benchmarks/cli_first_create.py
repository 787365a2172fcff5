"""Where `benchflow run tasks/hello-world -a oracle`'s container create comes, per source tree.

For each tree (as in `cli_ab.py`: a checkout or a compiled `git archive`, first on
PYTHONPATH under this venv's Python), one process per round, the trees alternating; each
process records, at its first container create (the request going out through
`http.client`, from the Docker SDK or not, in whichever thread) and at its exit: the
process's CPU time (user + system), the modules loaded, the wall time since it started,
and whether the rollout machinery (`benchflow.rollout.rollout`) and the Docker SDK were
loaded yet. Counts, not only wall time: on a shared
machine they barely move with the load. Prints each round, then the medians per tree.

    python labs/benchmarks/cli_first_create.py main=/tmp/main branch=. [--rounds 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "tasks" / "hello-world"
PROBE = """
import atexit, json, os, resource, sys, time
start = time.perf_counter()
def now():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_ms": (r.ru_utime + r.ru_stime) * 1000, "modules": len(sys.modules),
            "wall_ms": (time.perf_counter() - start) * 1000,
            "machinery": "benchflow.rollout.rollout" in sys.modules,
            "sdk": "docker" in sys.modules}
seen = {}
import http.client  # both the Docker SDK (urllib3) and benchflow's engine.py send through it
putrequest = http.client.HTTPConnection.putrequest
def first_create(self, method, url, *args, **kwargs):
    if "/containers/create" in url:
        seen.setdefault("create", now())
    return putrequest(self, method, url, *args, **kwargs)
http.client.HTTPConnection.putrequest = first_create
atexit.register(lambda: print("PROBE " + json.dumps({**seen, "exit": now()}), file=sys.stderr))
sys.argv = ["benchflow", "run", sys.argv[1], "-a", "oracle", "--jobs-dir", sys.argv[2]]
from benchflow.cli.main import main
main()
"""


def once(tree: Path, jobs: str) -> dict:
    done = subprocess.run([sys.executable, "-P", "-c", PROBE, str(TASK), jobs],
                          capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=str(tree)))
    line = next((x for x in done.stderr.splitlines() if x.startswith("PROBE ")), None)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"{tree}: the run failed:\n{done.stderr[-2000:]}")
    return json.loads(line.removeprefix("PROBE "))


def main(trees: dict[str, Path], rounds: int) -> None:
    jobs = tempfile.mkdtemp(prefix="cli-first-create-")
    for tree in trees.values():
        once(tree, jobs)  # warm-up: the image, the page cache
    seen: dict[str, list[dict]] = {name: [] for name in trees}
    loads = []
    names = list(trees)
    for r in range(rounds):
        loads.append(os.getloadavg()[0])
        for name in names[r % len(names):] + names[:r % len(names)]:
            seen[name].append(once(trees[name], jobs))
        print(f"round {r + 1:2d} (load {loads[-1]:4.1f}): " + ", ".join(
            f"{n} create at cpu {seen[n][-1]['create']['cpu_ms']:3.0f} ms "
            f"({seen[n][-1]['create']['modules']} modules), exit cpu "
            f"{seen[n][-1]['exit']['cpu_ms']:3.0f}" for n in names), flush=True)
    print(f"load (1 min) {min(loads):.1f}-{max(loads):.1f}; {rounds} rounds; medians:")
    for name, runs in seen.items():
        def med(when: str, key: str) -> float:
            return statistics.median(run[when][key] for run in runs)
        machinery = sum(run["create"]["machinery"] for run in runs)
        sdk = sum(run["create"]["sdk"] for run in runs)
        print(f"  {name:8s} at the first create: cpu {med('create', 'cpu_ms'):4.0f} ms, "
              f"{med('create', 'modules'):4.0f} modules, wall {med('create', 'wall_ms'):4.0f} ms, "
              f"rollout machinery loaded in {machinery}/{len(runs)}, the Docker SDK in "
              f"{sdk}/{len(runs)}; at exit: cpu "
              f"{med('exit', 'cpu_ms'):4.0f} ms, {med('exit', 'modules'):4.0f} modules, wall "
              f"{med('exit', 'wall_ms'):4.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="NAME=PATH of a source tree")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    main({n: Path(p).resolve() for n, p in (t.split("=", 1) for t in args.trees)}, args.rounds)
