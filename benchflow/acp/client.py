"""benchflow's side of ACP: the `acp.Client` the agent talks to.

The SDK routes the agent's requests here: permission requests go to the
`PermissionPolicy` (and into the trajectory), file and terminal requests to the
sandbox. Session updates are already recorded by the transport hook when they
arrive, so `session_update` has nothing left to do.
"""

from __future__ import annotations

from typing import Any

from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    CreateElicitationResponse,
    CreateTerminalResponse,
    DeniedOutcome,
    ElicitationMode,
    EnvVariable,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)
from pydantic import BaseModel

from benchflow.acp.fs import SandboxFs
from benchflow.acp.permissions import PermissionPolicy, PermissionRequest
from benchflow.acp.recorder import UpdateRecorder
from benchflow.acp.terminals import TerminalManager


def _raw(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


class BenchflowClient:
    """Implements the `acp.interfaces.Client` protocol over a sandbox."""

    def __init__(
        self,
        recorder: UpdateRecorder,
        policy: PermissionPolicy,
        fs: SandboxFs,
        terminals: TerminalManager,
    ) -> None:
        self._recorder = recorder
        self._policy = policy
        self._fs = fs
        self._terminals = terminals

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Nothing to do: `UpdateRecorder.on_receive` recorded it on arrival."""

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **kwargs: Any,
    ) -> RequestPermissionResponse:
        request = PermissionRequest(
            session_id=session_id, tool_call=_raw(tool_call), options=[_raw(o) for o in options]
        )
        with self._recorder.client_busy():
            answer = await self._policy.decide(request)
        self._recorder.record(
            "permission",
            session_id=session_id,
            tool_call=request.tool_call,
            options=request.options,
            outcome=answer.outcome,
            option_id=answer.option_id,
            option_kind=answer.option_kind,
            policy=self._policy.name,
        )
        if answer.option_id is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=answer.option_id)
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> ReadTextFileResponse:
        with self._recorder.client_busy():
            return ReadTextFileResponse(
                content=await self._fs.read_text(path, line=line, limit=limit)
            )

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        with self._recorder.client_busy():
            await self._fs.write_text(path, content)
        return WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        with self._recorder.client_busy():
            terminal_id = await self._terminals.create(
                command, args, {e.name: e.value for e in env or []}, cwd, output_byte_limit
            )
        return CreateTerminalResponse(terminal_id=terminal_id)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> TerminalOutputResponse:
        output, truncated, status = self._terminals.output(terminal_id)
        exit_status = (
            TerminalExitStatus(exit_code=status.exit_code, signal=status.signal) if status else None
        )
        return TerminalOutputResponse(output=output, truncated=truncated, exit_status=exit_status)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        with self._recorder.client_busy():
            status = await self._terminals.wait_for_exit(terminal_id)
        return WaitForTerminalExitResponse(exit_code=status.exit_code, signal=status.signal)

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> KillTerminalResponse:
        await self._terminals.kill(terminal_id)
        return KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> ReleaseTerminalResponse:
        await self._terminals.release(terminal_id)
        return ReleaseTerminalResponse()

    async def create_elicitation(
        self, message: str, mode: ElicitationMode, **kwargs: Any
    ) -> CreateElicitationResponse:
        """Unattended runs answer no questions (only routed with the unstable protocol)."""
        raise RequestError.method_not_found("elicitation/create")

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None


__all__ = ["BenchflowClient"]
