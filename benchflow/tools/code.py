"""`code:run`: Python or a shell command in the session's sandbox, with a deadline.

The sandbox is Docker by default (`benchflow/tools/images/code/`, Debian + Python 3;
`resource_init_configs.code.image` picks another), the network off unless
`code.allow_internet` is true. Files persist between calls of one session.
"""

from __future__ import annotations

import base64
import shlex
from typing import Any

from benchflow.tools.base import ToolResult, ToolSpec
from benchflow.tools.sandboxes import session_sandbox
from benchflow.tools.session import ToolSession

MAX_CHARS = 20_000


async def run(session: ToolSession, args: dict[str, Any]) -> ToolResult:
    code = args.get("code")
    language = args.get("language", "python")
    if not isinstance(code, str) or not code.strip():
        return ToolResult("error: `code` (a string) is required", is_error=True)
    if language not in ("python", "shell"):
        return ToolResult("error: `language` is python or shell", is_error=True)
    limit = float(session.config("code").get("timeout_sec", min(session.timeout_sec, 60)))
    asked = args.get("timeout_sec")
    if isinstance(asked, (int, float)) and asked > 0:
        limit = min(float(asked), limit)
    sandbox = await session_sandbox(session, "code")
    encoded = base64.b64encode(code.encode()).decode()
    runner = "python3 /tmp/.bf_code.py" if language == "python" else "bash /tmp/.bf_code.py"
    script = f"printf %s {shlex.quote(encoded)} | base64 -d > /tmp/.bf_code.py && {runner}"
    result = await sandbox.exec(["bash", "-c", script], timeout=limit)
    output = result.text()
    if len(output) > MAX_CHARS:
        output = output[:MAX_CHARS] + f"\n[... {len(output) - MAX_CHARS} characters cut]"
    if result.timed_out:
        return ToolResult(f"[timed out after {limit:g} s]\n{output}", is_error=True)
    return ToolResult(f"[exit code {result.exit_code}]\n{output}",
                      is_error=result.exit_code != 0)


TOOLS = {
    "code:run": ToolSpec(
        "code:run", "Run Python code (or a bash script) in a sandbox and return its exit code "
        "and output. Files persist between calls.",
        {"type": "object", "properties": {
            "code": {"type": "string"},
            "language": {"type": "string", "enum": ["python", "shell"]},
            "timeout_sec": {"type": "number"}}, "required": ["code"]}, run),
}

__all__ = ["TOOLS", "run"]
