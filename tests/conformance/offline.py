"""What the offline conformance tests assert about a finished rollout, whatever the agent.

Agents report the same tool call with different event sequences (claude: tool_call,
permission, updates; codex: tool_call then one update; gemini: no arguments nor output in
its updates, benchflow adds them from the model calls; opencode: several updates), so
these helpers look at each tool call as benchflow's one tool-call model merges it, and at
the effects: the verifier's reward, the request log, the tool result the agent sent back
to the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
TASK = HERE / "tasks" / "offline-two-step"
MODEL_SCRIPT = HERE / "two-step.yaml"
WRITE_COMMAND = "printf '3\\n4\\n5\\n' > /app/numbers.txt"
SUM_COMMAND = "awk '{ s += $1 } END { print s }' /app/numbers.txt | tee /app/sum.txt"
FINAL_MESSAGE = "The sum of the numbers is 12."


@dataclass
class ToolCall:
    """One tool call of the trajectory as benchflow's one tool-call model merges it
    (`benchflow.trajectory.tool_calls`): its status, and its texts (title, arguments,
    command, output) to search."""

    id: str
    status: str | None = None
    texts: list[str] = field(default_factory=list)
    output: str = ""

    def mentions(self, needle: str) -> bool:
        return any(needle in text for text in self.texts)


def events(rollout_dir: Path) -> list[dict[str, Any]]:
    lines = (rollout_dir / "trajectory" / "acp_trajectory.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def tool_calls(evts: list[dict[str, Any]]) -> dict[str, ToolCall]:
    """Tool calls by id, merged from all their events (tool_call, tool_call_update, and
    the tool_result benchflow adds from the model calls for agents such as gemini)."""
    from benchflow.trajectory.conversation import group_turns
    from benchflow.trajectory.events import event_adapter

    parsed = [event_adapter().validate_python(e) for e in evts if e.get("type") != "header"]
    calls: dict[str, ToolCall] = {}
    for block in group_turns(parsed):
        for call in block.tool_calls:
            texts = [call.title, call.arguments, call.output, *_strings(call.input)]
            if call.command:
                texts.append(call.command)
            calls[call.id] = ToolCall(call.id, call.status, [t for t in texts if t],
                                      call.output)
    return calls


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def final_text(evts: list[dict[str, Any]]) -> str:
    """The agent's message text after its last tool call."""
    last_tool = max((i for i, e in enumerate(evts)
                     if e.get("type") in ("tool_call", "tool_call_update", "permission")),
                    default=-1)
    return "".join(e.get("text") or "" for e in evts[last_tool + 1:]
                   if e.get("type") == "agent_message")


def requests(rollout_dir: Path) -> list[dict[str, Any]]:
    """The model server's log lines (`summary` + `body`)."""
    path = rollout_dir / "model_server" / "requests.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def tool_results(api: str, body: dict[str, Any]) -> list[str]:
    """The tool results a request sends back to the model, as text, in order."""
    out: list[str] = []
    if api == "anthropic":
        for message in body.get("messages") or []:
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    out.append(" ".join(_strings(block.get("content"))))
    elif api == "openai-chat":
        for message in body.get("messages") or []:
            if message.get("role") == "tool":
                out.append(" ".join(_strings(message.get("content"))))
    elif api == "openai-responses":
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type", "").endswith("call_output"):
                out.append(" ".join(_strings(item.get("output"))))
    elif api == "gemini":
        for content in body.get("contents") or []:
            for part in content.get("parts") or []:
                response = part.get("functionResponse") or part.get("function_response")
                if response:
                    out.append(" ".join(_strings(response.get("response"))))
    return out


def rollout_dir(jobs_dir: Path, job_name: str, agent: str) -> Path:
    return jobs_dir / job_name / agent / TASK.parent.name / f"{TASK.name}__1"


def report_durations(request: Any, results: dict[str, Any], wall: float,
                     title: str = "offline conformance") -> None:
    """Print a table of the agents' rollouts (reward, install, agent and total seconds;
    `results`: agent -> RolloutResult) after the test output, for `request`'s session."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{title}: {len(results)} agents in parallel, {wall:.1f} s wall clock",
             f"{'agent':<9} {'reward':>6} {'install s':>9} {'agent s':>8} {'total s':>8}  error"]
    for agent, result in results.items():
        d = result.durations
        error = result.error.type if result.error else ""
        lines.append(f"{agent:<9} {result.reward!s:>6} {d.agent_setup_sec or 0:>9.1f} "
                     f"{d.agent_execution_sec or 0:>8.1f} {d.total_sec or 0:>8.1f}  {error}")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line)
