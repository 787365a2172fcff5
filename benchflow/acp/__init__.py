"""The ACP client: agents in sandboxes, spoken to through the agent-client-protocol SDK.

`AcpSession.open(sandbox, argv=..., cwd=...)` starts an agent and runs the
handshake; `session.prompt(text)` runs one turn, recording every update to the
trajectory as it arrives. `PermissionPolicy` answers permission requests.
"""

from benchflow.acp.errors import AgentExitedError, map_acp_errors
from benchflow.acp.launch import launch_command
from benchflow.acp.permissions import PermissionAnswer, PermissionPolicy, PermissionRequest
from benchflow.acp.session import AcpSession, AcpTimeouts, PromptOutcome
from benchflow.trajectory.events import Usage

__all__ = [
    "AcpSession",
    "AcpTimeouts",
    "AgentExitedError",
    "PermissionAnswer",
    "PermissionPolicy",
    "PermissionRequest",
    "PromptOutcome",
    "Usage",
    "launch_command",
    "map_acp_errors",
]
