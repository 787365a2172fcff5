"""The files a QA rollout leaves in `output_dir`, in the AgentFlow formats.

- `results.jsonl`: one line per item: task_id, question, predicted_answer, success,
  ground_truth, score, error, trajectory (`save_trajectories`; with `trajectory_only` the
  trajectory keeps only the messages and the final answer).
- `evaluation.json`: the metric, the average score over scored items, per-metric averages
  and each item's score and rewards.
- `summary_<benchmark>_<timestamp>.json`: benchmark_name, total_tasks, successful_tasks,
  failed_tasks, average_score, metric, total_time_seconds, results_file, evaluation_file,
  timestamp (plus scored_tasks and jobs_dir).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from benchflow.rollout.result import RolloutResult, write_json_atomic
from benchflow.task.qa import QaItem
from benchflow.trajectory.events import (
    AgentMessageEvent,
    ToolCallEvent,
    ToolCallUpdateEvent,
    UsageEvent,
    UserMessageEvent,
)
from benchflow.trajectory.reader import iter_events


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def trajectory_payload(item: QaItem, result: RolloutResult | None, *, minimal: bool = False
                       ) -> dict[str, Any]:
    """The AgentFlow trajectory object of one item, from the rollout's trajectory file."""
    messages: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    turns = 0
    path = Path(result.trajectory_path) if result and result.trajectory_path else None
    if path is not None and path.exists():
        for event in iter_events(path):
            if isinstance(event, UserMessageEvent):
                messages.append({"role": "user", "content": event.text})
            elif isinstance(event, AgentMessageEvent):
                messages.append({"role": "assistant", "content": event.text})
            elif isinstance(event, UsageEvent) and event.scope == "turn":
                turns += 1
            elif isinstance(event, ToolCallEvent) and event.tool_call_id:
                calls[event.tool_call_id] = {
                    "id": event.tool_call_id, "title": event.title, "kind": event.kind,
                    "arguments": event.update.get("rawInput")}
            elif isinstance(event, ToolCallUpdateEvent) and event.tool_call_id in calls:
                raw = event.update.get("rawOutput")
                calls[event.tool_call_id].update(
                    status=event.status,
                    output=raw.get("output") if isinstance(raw, dict) else raw)
    final = result.answer if result else None
    if minimal:
        return {"task_id": item.id, "messages": messages, "final_answer": final}
    stamps = result.timestamps if result else None
    total = result.durations.total_sec if result else None
    return {
        "task_id": item.id, "question": item.question, "messages": messages,
        "tool_calls": list(calls.values()), "final_answer": final, "total_turns": turns,
        "success": bool(result and result.error is None),
        "start_time": _iso(stamps.started_at if stamps else None),
        "end_time": _iso(stamps.ended_at if stamps else None),
        "execution_time_ms": round(total * 1000) if total is not None else None,
    }


def result_line(item: QaItem, result: RolloutResult | None, *, evaluate: bool,
                save_trajectories: bool, trajectory_only: bool) -> dict[str, Any]:
    """One `results.jsonl` record."""
    error = None
    if result is None:
        error = "not run"
    elif result.error is not None:
        error = f"{result.error.type}: {result.error.message}"
    line: dict[str, Any] = {
        "task_id": item.id, "question": item.question,
        "predicted_answer": result.answer if result else None,
        "success": result is not None and result.error is None,
        "ground_truth": item.answer,
        "score": result.reward if (evaluate and result) else None,
        "error": error,
    }
    if evaluate and result and result.rewards:
        line["rewards"] = result.rewards
    if save_trajectories:
        line["trajectory"] = trajectory_payload(item, result, minimal=trajectory_only)
    return line


def evaluation(items: Sequence[QaItem], results: dict[str, RolloutResult], metric: str
               ) -> dict[str, Any]:
    """The `evaluation.json` document."""
    rows, sums, counts = [], {}, {}  # type: ignore[var-annotated]
    for item in items:
        result = results.get(item.id)
        rewards = result.rewards if result else None
        rows.append({"task_id": item.id, "ground_truth": item.answer,
                     "predicted_answer": result.answer if result else None,
                     "score": result.reward if result else None, "rewards": rewards,
                     "scored": rewards is not None})
        for name, value in (rewards or {}).items():
            if name != "reward":
                sums[name] = sums.get(name, 0.0) + value
                counts[name] = counts.get(name, 0) + 1
    scores = [r["score"] for r in rows if r["score"] is not None]
    return {
        "metric": metric,
        "total_tasks": len(rows),
        "scored_tasks": len(scores),
        "average_score": round(sum(scores) / len(scores), 6) if scores else None,
        "metric_averages": {k: round(sums[k] / counts[k], 6) for k in sums},
        "items": rows,
    }


def write_jsonl(path: Path, lines: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    write_json_atomic(path, text)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, json.dumps(data, indent=2, ensure_ascii=False))


__all__ = ["evaluation", "result_line", "trajectory_payload", "write_json", "write_jsonl"]
