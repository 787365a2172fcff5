"""File-system calls per rollout on the host (deterministic, unlike timings).

Creating a file or folder is the worker threads' main cost at 1,000 rollouts in flight
(0.4-0.5 ms of CPU per file under `/work` on the project's VM). This runs `scale.py`'s
job (the real job layer on the `latency-fake` backend, `latency_fake.py`) with N
rollouts at concurrency N, after a warm-up job, and counts Python's audit events
(`sys.addaudithook`: `open`, `os.mkdir`, `os.rename`, `os.listdir`, ...) whose path is
in the jobs folder, per rollout, with the code that made each call. A `mkdir(exist_ok=
True)` of a folder that exists is one event here and two system calls (`mkdir`, then a
`stat`); `strace -f -e trace=file` shows those (stat and exists() raise no audit event).

    python labs/benchmarks/file_ops.py [--rollouts 8]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import scale  # noqa: E402
from latency_fake import LatencyProvider  # noqa: E402

from benchflow.job.loop import run_job_loop  # noqa: E402
from benchflow.sandbox.registry import register_provider  # noqa: E402

EVENTS = {"open", "os.mkdir", "os.rename", "os.replace", "os.remove", "os.rmdir",
          "os.listdir", "os.scandir", "os.chmod", "os.truncate", "shutil.rmtree"}


class Counting:
    """An audit hook counting file events under `root` by (event, name, caller)."""

    def __init__(self) -> None:
        self.root = ""
        self.events: Counter[tuple[str, str, str]] = Counter()

    def __call__(self, event: str, args: tuple[object, ...]) -> None:
        if not self.root or event not in EVENTS or not args:
            return
        path = args[0]
        if not isinstance(path, str | os.PathLike) or not str(path).startswith(self.root):
            return
        name = re.sub(r"\.\d+\.tmp$", ".PID.tmp", Path(path).name)  # write_json_atomic's
        name = re.sub(r"__\d+$", "__N", name)  # a rollout's folder
        self.events[(event, name, _caller())] += 1


def _caller() -> str:
    """The innermost benchflow frame (the fake backend's own calls: `latency_fake`)."""
    frame = sys._getframe(2)
    while frame is not None:
        file = frame.f_code.co_filename
        if "/benchflow/" in file or file.endswith("latency_fake.py"):
            return f"{Path(file).parent.name}/{Path(file).name}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def main(rollouts: int) -> None:
    register_provider(LatencyProvider)
    counting = Counting()
    sys.addaudithook(counting)
    with tempfile.TemporaryDirectory(prefix="file-ops-") as tmp:
        run_job_loop(lambda: scale.one_run(4, 4, Path(tmp) / "warm", 200, 0.0))
        counting.root = str(Path(tmp) / "jobs")
        run_job_loop(lambda: scale.one_run(rollouts, rollouts, Path(tmp) / "jobs", 200, 0.0))
        counting.root = ""
    by_event: Counter[str] = Counter()
    for (event, _, _), n in counting.events.items():
        by_event[event] += n
    print(f"file events in the jobs folder per rollout ({rollouts} rollouts, the job's own "
          f"files included, spread over them):")
    for event, n in sorted(by_event.items()):
        print(f"  {event:12} {n / rollouts:6.2f}")
    print(f"  {'all':12} {sum(by_event.values()) / rollouts:6.2f}\n")
    for (event, name, caller), n in sorted(counting.events.items()):
        print(f"  {n / rollouts:6.2f}  {event:10} {name:24} {caller}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rollouts", type=int, default=8)
    main(parser.parse_args().rollouts)
