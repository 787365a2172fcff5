"""How long `import benchflow.tracing` takes (the SDK an agent endpoint imports), against the
standard-library modules it needs: the best of N fresh interpreters each, wall and CPU time
(on a loaded machine the wall time is mostly waiting for a core). Target < 100 ms.

    .venv/bin/python labs/benchmarks/tracing_import.py [--runs 15]
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CASES = {
    "stdlib it uses": "import typing, dataclasses, re, json, threading, contextvars, hashlib, "
                      "secrets, logging, datetime, pathlib",
    "benchflow.tracing": "import benchflow.tracing",
    "benchflow.tracing + one exported span (loads OpenTelemetry)":
        "import benchflow.tracing as t\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "c = t.Rollout(exporter=InMemorySpanExporter())\n"
        "with c.trace('x'): pass\nc.shutdown()",
}


def best_ms(code: str, runs: int) -> tuple[float, float]:
    """The best wall time and the best CPU time (what a loaded machine does not inflate)."""
    timer = ("import time\n_t, _c = time.perf_counter(), time.process_time()\n" + code +
             "\nprint(time.perf_counter() - _t, time.process_time() - _c)")
    samples = [tuple(map(float, subprocess.run([sys.executable, "-c", timer], capture_output=True,
                                                text=True, check=True).stdout.split()))
               for _ in range(runs)]
    return min(s[0] for s in samples) * 1000, min(s[1] for s in samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(f"{'best of ' + str(args.runs):<62} {'wall':>8} {'cpu':>8}")
    for name, code in CASES.items():
        wall, cpu = best_ms(code, args.runs)
        print(f"{name:<62} {wall:5.1f} ms {cpu:5.1f} ms")


if __name__ == "__main__":
    main()
