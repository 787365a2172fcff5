"""How long `import benchflow.tracing` takes (the SDK an agent endpoint imports), against the
standard-library modules it needs: the best of N fresh interpreters each. Target < 100 ms.

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


def best_ms(code: str, runs: int) -> float:
    timer = ("import time\n_t = time.perf_counter()\n" + code +
             "\nprint(time.perf_counter() - _t)")
    return min(float(subprocess.run([sys.executable, "-c", timer], capture_output=True,
                                    text=True, check=True).stdout) for _ in range(runs)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    for name, code in CASES.items():
        print(f"{name:<62} {best_ms(code, args.runs):7.1f} ms (best of {args.runs})")


if __name__ == "__main__":
    main()
