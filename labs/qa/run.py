"""Run tasks/qa-example.jsonl with every metric against the scripted model; print a table.

    .venv/bin/python labs/qa/run.py [--out labs/qa/results.md]

Offline: the scripted model (tasks/qa-example.script.yaml) answers each question and also
acts as the llm_judgement evaluator. No sandbox is started (the model agent has no tools).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import anyio

from benchflow.model_server import ModelServer, load_script
from benchflow.qa import arollout, parse_config
from benchflow.verify.metrics import METRICS

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tasks" / "qa-example.jsonl"
SCRIPT = ROOT / "tasks" / "qa-example.script.yaml"


async def main(out: Path | None) -> None:
    with ModelServer(load_script(SCRIPT)) as server, tempfile.TemporaryDirectory() as tmp:
        config = parse_config({
            "data_path": str(DATA), "output_dir": tmp, "model_name": "scripted-qa",
            "base_url": f"{server.url}/v1", "max_workers": 4,
            "evaluation_metric": "exact_match",
            "extra_metrics": [m for m in METRICS if m != "exact_match"]}, "labs/qa")
        started = time.monotonic()
        summary = await arollout(config)
        elapsed = time.monotonic() - started
        lines = [json.loads(x) for x in Path(summary["results_file"]).read_text().splitlines()]
    header = "| item | answer | " + " | ".join(METRICS) + " |"
    rows = [header, "|" + "---|" * (len(METRICS) + 2)]
    sums = dict.fromkeys(METRICS, 0.0)
    scored = 0
    for line in lines:
        rewards = line.get("rewards") or {}
        cells = [f"{rewards[m]:.3f}" if m in rewards else "-" for m in METRICS]
        if rewards:
            scored += 1
            for m in METRICS:
                sums[m] += rewards[m]
        rows.append(f"| {line['task_id']} | {line['predicted_answer']} | " + " | ".join(cells)
                    + " |")
    rows.append("| **mean** (scored items) | | "
                + " | ".join(f"**{sums[m] / scored:.3f}**" for m in METRICS) + " |")
    table = "\n".join(rows)
    footer = (f"\n{summary['total_tasks']} items, {scored} scored, "
              f"{summary['successful_tasks']} without error; {elapsed:.1f} s wall clock "
              f"(4 workers, no sandbox).\n")
    print(table + footer)
    if out is not None:
        out.write_text(table + "\n" + footer)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    anyio.run(main, args.out)
