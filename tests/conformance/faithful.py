"""What a faithful record of a two-role scene of real agents holds (issue 22's checks).

Shared by the unit tests on the recorded goldens (`tests/unit/trajectory/test_golden.py`)
and the live run of the four real agents (`tests/conformance/test_faithful_records.py`):
for every role of every rollout, the `sft`, `sharegpt` and `atif` exports and the viewer's
HTML show each scripted command in the call's arguments and its real output; every
role's tokens are above 0; each line's metadata names its role's own agent.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchflow.job.export import ExportFilters, export_job
from benchflow.job.store import iter_trial_results
from benchflow.rollout.result import RolloutResult
from tests.golden.record import COMMANDS, PAIRS


def strings(value: Any) -> list[str]:
    """Every string in a JSON value (a tool call's arguments, its output)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


def names_command(arguments: Any, command: str) -> bool:
    """The arguments hold the command (claude's `command`, codex's argv, gemini's...)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return command in arguments
    return any(command in s for s in strings(arguments))


@dataclass
class Calls:
    """One role's tool calls in one export: (arguments, output) pairs."""

    pairs: list[tuple[Any, str]] = field(default_factory=list)

    def check(self, role: str, where: str) -> None:
        for command, output in COMMANDS[role]:
            found = [out for args, out in self.pairs if names_command(args, command)]
            assert found, f"{where}: no tool call with arguments holding {command!r}: {self.pairs}"
            if output is not None:
                assert any(output in out for out in found), (
                    f"{where}: {command!r} has no output holding {output!r}: {found}")


def _results(job_dir: Path) -> dict[str, RolloutResult]:
    return {r.agent_name: r for r in iter_trial_results(job_dir)}


def check_results(job_dir: Path) -> dict[str, dict[str, tuple[str, int, int, str | None]]]:
    """Every rollout scored 1.0, names each role's agent, and counted its tokens (> 0).

    Returns each rollout's roles: (agent, input tokens, output tokens, usage source)."""
    results = _results(job_dir)
    assert set(results) == set(PAIRS), results.keys()
    numbers = {}
    for label, result in results.items():
        assert result.error is None and result.reward == 1.0, (label, result.error)
        coder, reviewer = PAIRS[label]
        assert {n: r.agent for n, r in result.roles.items()} == {"coder": coder,
                                                                  "reviewer": reviewer}
        for name, role in result.roles.items():
            assert role.tokens is not None and role.tokens.input > 0 and role.tokens.output > 0, \
                (label, name, role)
            assert role.model, (label, name)
        assert result.tokens is not None
        assert result.tokens.input == sum(r.tokens.input for r in result.roles.values()
                                          if r.tokens)
        numbers[label] = {n: (r.agent, r.tokens.input, r.tokens.output, r.usage_source)
                          for n, r in result.roles.items() if r.tokens}
    return numbers


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _by_role(records: list[dict[str, Any]], results: dict[str, RolloutResult]
             ) -> dict[tuple[str, str], dict[str, Any]]:
    """Export lines by (rollout label, role), checking each names its role's agent."""
    out = {}
    by_rollout = {r.rollout_name: r for r in results.values()}
    for record in records:
        meta = record.get("metadata") or record.get("extra")
        result = by_rollout[meta["rollout"]]
        role = meta["role"]
        assert meta["agent"] == result.roles[role].agent, meta
        assert meta["model"] == result.roles[role].model, meta
        out[(result.agent_name, role)] = record
    return out


def check_exports(job_dir: Path, out_dir: Path) -> dict[str, int]:
    """sft, sharegpt and atif: one line per rollout and role with every command and output;
    returns the line counts."""
    results = _results(job_dir)
    counts = {}
    for fmt in ("sft", "sharegpt", "atif"):
        path = out_dir / f"{fmt}.jsonl"
        export_job(job_dir, fmt, path)  # type: ignore[arg-type]
        records = _by_role(_lines(path), results)
        counts[fmt] = len(records)
        assert set(records) == {(label, role) for label in PAIRS for role in ("coder", "reviewer")}
        for (label, role), record in records.items():
            calls = Calls()
            if fmt == "sft":
                messages = record["messages"]
                outputs = {m["tool_call_id"]: m["content"] for m in messages
                           if m["role"] == "tool"}
                calls.pairs = [(c["function"]["arguments"], outputs[c["id"]])
                               for m in messages for c in m.get("tool_calls", [])]
            elif fmt == "sharegpt":
                turns = record["conversations"]
                calls.pairs = [(json.loads(t["value"])["arguments"], turns[i + 1]["value"])
                               for i, t in enumerate(turns) if t["from"] == "function_call"]
            else:
                for step in record["steps"]:
                    results_by_id = {r["source_call_id"]: r.get("content", "")
                                     for r in (step.get("observation") or {}).get("results", [])}
                    calls.pairs += [(c["arguments"], results_by_id[c["tool_call_id"]])
                                    for c in step.get("tool_calls") or []]
                final = record["final_metrics"]
                assert final.get("total_prompt_tokens", 0) > 0, (label, role, final)
            calls.check(role, f"{fmt} {label} {role}")
    return counts


def check_viewer(job_dir: Path) -> int:
    """The trial pages show every role's agent, each command and its real output."""
    from benchflow.view.render import Pages

    pages = Pages(job_dir.parent, static=True)
    results = _results(job_dir)
    total = 0
    for label, result in results.items():
        trial = job_dir / result.rollout_name
        page = pages.trial(job_dir, trial)
        assert page is not None
        text = html.unescape(page)
        total += len(page)
        for role, (agent) in zip(("coder", "reviewer"), PAIRS[label], strict=True):
            assert f">{agent}<" in page, (label, role, agent)
            for command, output in COMMANDS[role]:
                assert command in text, (label, command)
                if output is not None:
                    assert output in text, (label, output)
    return total


def check_model_calls(job_dir: Path, out_dir: Path) -> tuple[int, str]:
    """`--from model-calls`: lines from every agent's API, each naming its role's agent;
    returns the line count and the skipped calls' summary."""
    from benchflow.job.export import ExportStats

    path = out_dir / "calls.jsonl"
    stats: ExportStats = export_job(job_dir, "sft", path, ExportFilters(), "model-calls")
    records = _lines(path)
    results = _results(job_dir)
    by_rollout = {r.rollout_name: r for r in results.values()}
    seen = set()
    for record in records:
        meta = record["metadata"]
        result = by_rollout[meta["rollout"]]
        if meta["role"] is None:
            continue
        assert meta["agent"] == result.roles[meta["role"]].agent, meta
        seen.add((meta["agent"], meta["api"]))
    assert {agent for agent, _ in seen} == {"claude", "codex", "gemini", "opencode"}, seen
    assert {api for _, api in seen} == {"anthropic", "openai-responses", "gemini",
                                        "openai-chat"}, seen
    return len(records), stats.skipped_summary()


__all__ = ["Calls", "check_exports", "check_model_calls", "check_results", "check_viewer",
           "names_command", "strings"]
