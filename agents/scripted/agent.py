#!/usr/bin/env python3
"""A deterministic ACP agent whose every decision comes from a script file.

benchflow's tests (and anyone debugging a rollout without spending tokens) run it
as `python3 agent.py`: it speaks ACP on stdio through the agent-client-protocol
SDK, and for the k-th prompt its role receives it plays `turns[k]` of the script:
messages, thoughts, plans, shell commands through the client's terminal, file
reads and writes through the client's fs, permission requests, usage reports,
and misbehaviour on purpose (crash, hang, garbage on stdout, huge lines).

Configuration (environment):
  SCRIPTED_AGENT_SCRIPT     path of the script (JSON, or YAML when PyYAML is installed)
  SCRIPTED_AGENT_MODEL      initial model id; used as the script path when it is one
  BENCHFLOW_ROLE            role whose turns to play (default "default")
  SCRIPTED_AGENT_STATE_DIR  where per-role prompt counters live (default /tmp/.scripted-agent/)

See README.md beside this file for the script format.
Dependencies: the standard library, agent-client-protocol (and its pydantic).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, run_agent, stdio_streams
from acp.helpers import (
    plan_entry,
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    tool_terminal_ref,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    AuthenticateResponse,
    AuthEnvVar,
    Cost,
    EnvVarAuthMethod,
    Implementation,
    InitializeResponse,
    McpCapabilities,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SetSessionConfigOptionResponse,
    ToolCallUpdate,
    Usage,
    UsageUpdate,
)

LOG = logging.getLogger("scripted-agent")
NAME = "scripted"
VERSION = "1.0.0"
API_KEY_VAR = "SCRIPTED_AGENT_API_KEY"
DEFAULT_MODEL = "scripted"
NO_MORE_TURNS = "scripted agent: no more turns"
STDIO_LIMIT = 64 * 1024 * 1024


class Cancelled(Exception):
    """The client sent session/cancel while an action was running."""


class StopTurn(Exception):
    """An action ended the turn early (e.g. a permission denied with `on_deny: stop`)."""


@dataclass
class SessionState:
    session_id: str
    cwd: str
    model: str
    history: list[str] = field(default_factory=list)
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    cost: float = 0.0
    context_used: int = 0
    mcp_servers: list[Any] = field(default_factory=list)


# --------------------------------------------------------------------------- script


def load_script(path: Path) -> dict[str, Any]:
    """Parse a script file: JSON always; YAML when the suffix says so (needs PyYAML)."""
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml  # optional dependency, only for YAML scripts

        data = yaml.safe_load(text)
    else:
        try:
            data = json.loads(text)
        except ValueError:
            import yaml

            data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise TypeError(f"{path}: a script is a mapping with `roles:` (or `turns:`)")
    return data


def role_turns(script: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """The turns of `role`, falling back to the `default` role and to top-level `turns`."""
    roles = script.get("roles") or {}
    spec = roles.get(role) or roles.get("default") or {"turns": script.get("turns") or []}
    return list(spec.get("turns") or [])


def choose_turn(turns: list[dict[str, Any]], k: int, prompt: str) -> dict[str, Any] | None:
    """The turn for the k-th prompt (0-based) of a role.

    A turn with `match` is played only when its regex finds the prompt, and then it
    wins over position. Otherwise the k-th of the turns without `match` is played;
    past their end, the last turn marked `repeat: true`; else None (the agent says
    "scripted agent: no more turns").
    """
    for turn in turns:
        pattern = turn.get("match")
        if pattern is not None and re.search(str(pattern), prompt, re.DOTALL):
            return turn
    positional = [t for t in turns if t.get("match") is None]
    if k < len(positional):
        return positional[k]
    repeats = [t for t in positional if t.get("repeat")]
    return repeats[-1] if repeats else None


def next_prompt_index(role: str, script_path: Path) -> int:
    """How many prompts this role already received with this script, across processes."""
    # per user: roles that run as different users must not share (or block) one folder
    state_dir = Path(os.environ.get("SCRIPTED_AGENT_STATE_DIR")
                     or f"/tmp/.scripted-agent-{os.getuid()}/")
    state_dir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(str(script_path.resolve()).encode()).hexdigest()[:12]
    safe_role = re.sub(r"[^A-Za-z0-9_.-]", "_", role)
    with open(state_dir / f"{safe_role}-{digest}.count", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        raw = fh.read().strip()
        k = int(raw) if raw.isdigit() else 0
        fh.seek(0)
        fh.truncate()
        fh.write(str(k + 1))
    return k


# --------------------------------------------------------------------------- agent


class ScriptedAgent:
    """The ACP `Agent`: sessions with history, a `model` config option, scripted turns."""

    def __init__(self, stdout_writer: asyncio.StreamWriter | None) -> None:
        self._conn: Any = None
        self._stdout = stdout_writer
        self._sessions: dict[str, SessionState] = {}
        self._role = os.environ.get("BENCHFLOW_ROLE") or "default"
        self._tool_ids = 0
        self.authenticated: str | None = None

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    # ---- handshake

    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        self.client_capabilities = client_capabilities
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=False, mcp_capabilities=McpCapabilities(http=True)
            ),
            auth_methods=[
                EnvVarAuthMethod(
                    type="env_var",
                    id="scripted-api-key",
                    name="Scripted API key",
                    vars=[AuthEnvVar(name=API_KEY_VAR, secret=True)],
                )
            ],
            agent_info=Implementation(name=NAME, title="Scripted ACP agent", version=VERSION),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> AuthenticateResponse:
        self.authenticated = method_id
        return AuthenticateResponse()

    async def new_session(
        self, cwd: str, additional_directories: Any = None, mcp_servers: Any = None, **kwargs: Any
    ) -> NewSessionResponse:
        session_id = f"sess-{uuid.uuid4().hex[:12]}"
        model = os.environ.get("SCRIPTED_AGENT_MODEL") or DEFAULT_MODEL
        state = SessionState(session_id=session_id, cwd=cwd, model=model,
                             mcp_servers=list(mcp_servers or []))
        self._sessions[session_id] = state
        return NewSessionResponse(session_id=session_id, config_options=[self._model_option(state)])

    def _model_option(self, state: SessionState) -> SessionConfigOptionSelect:
        values = dict.fromkeys([state.model, DEFAULT_MODEL])
        return SessionConfigOptionSelect(
            type="select",
            id="model",
            name="Model",
            category="model",
            current_value=state.model,
            options=[SessionConfigSelectOption(value=v, name=v) for v in values],
        )

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> SetSessionConfigOptionResponse:
        state = self._session(session_id)
        if config_id != "model" or not isinstance(value, str):
            raise RequestError.invalid_params(
                {"configId": config_id, "details": "only `model` is configurable"}
            )
        state.model = value
        return SetSessionConfigOptionResponse(config_options=[self._model_option(state)])

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        LOG.warning("session/cancel received for %s", session_id)
        if state := self._sessions.get(session_id):
            state.cancel.set()

    def _session(self, session_id: str) -> SessionState:
        try:
            return self._sessions[session_id]
        except KeyError:
            raise RequestError.invalid_params(
                {"sessionId": session_id, "details": "unknown session"}
            ) from None

    # ---- prompts

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        state = self._session(session_id)
        state.cancel = asyncio.Event()
        text = "".join(getattr(block, "text", "") or "" for block in prompt)
        previous = list(state.history)
        state.history.append(text)
        turn = self._turn_for(state, text)
        usage: dict[str, int] = {}
        if turn is None:
            await self._say(state, NO_MORE_TURNS)
            return PromptResponse(stop_reason="end_turn")
        try:
            for action in turn.get("actions") or []:
                if state.cancel.is_set():
                    raise Cancelled
                await self._act(state, action, text, previous, usage)
        except Cancelled:
            return PromptResponse(stop_reason="cancelled", usage=_usage(usage))
        except StopTurn:
            pass
        return PromptResponse(
            stop_reason=turn.get("stop_reason") or "end_turn", usage=_usage(usage)
        )

    def _turn_for(self, state: SessionState, text: str) -> dict[str, Any] | None:
        path = self._script_path(state)
        if path is None:
            return {
                "actions": [
                    {
                        "type": "message",
                        "text": "scripted agent: no script "
                        "(set SCRIPTED_AGENT_SCRIPT or select a model that is a script path)",
                    }
                ]
            }
        k = next_prompt_index(self._role, path)
        return choose_turn(role_turns(load_script(path), self._role), k, text)

    @staticmethod
    def _script_path(state: SessionState) -> Path | None:
        for candidate in (
            os.environ.get("SCRIPTED_AGENT_SCRIPT"),
            state.model,
            os.environ.get("SCRIPTED_AGENT_MODEL"),
        ):
            if candidate and Path(candidate).is_file():
                return Path(candidate)
        return None

    async def _act(
        self,
        state: SessionState,
        action: dict[str, Any],
        prompt: str,
        previous: list[str],
        usage: dict[str, int],
    ) -> None:
        kind = action.get("type")
        handler = getattr(self, f"_do_{kind}", None)
        if handler is None:
            raise RequestError.invalid_params({"details": f"unknown scripted action type {kind!r}"})
        await handler(state, action, prompt=prompt, previous=previous, usage=usage)

    # ---- conversation actions

    async def _say(self, state: SessionState, text: str) -> None:
        await self._conn.session_update(
            session_id=state.session_id, update=update_agent_message_text(text)
        )

    async def _do_message(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        await self._say(state, str(action.get("text", "")))

    async def _do_thought(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        await self._conn.session_update(
            session_id=state.session_id,
            update=update_agent_thought_text(str(action.get("text", ""))),
        )

    async def _do_plan(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        entries = [
            plan_entry(
                str(e.get("content", "")),
                priority=e.get("priority", "medium"),
                status=e.get("status", "pending"),
            )
            for e in action.get("entries") or []
        ]
        await self._conn.session_update(session_id=state.session_id, update=update_plan(entries))

    async def _do_echo_prompt(
        self, state: SessionState, action: dict[str, Any], *, prompt: str, **_: Any
    ) -> None:
        await self._say(state, prompt)

    async def _do_recall(
        self, state: SessionState, action: dict[str, Any], *, previous: list[str], **_: Any
    ) -> None:
        await self._say(state, json.dumps(previous))

    async def _do_status(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        await self._say(
            state,
            json.dumps(
                {
                    "role": self._role,
                    "model": state.model,
                    "session_id": state.session_id,
                    "cwd": state.cwd,
                    "authenticated": self.authenticated,
                    "turns_in_session": len(state.history),
                }
            ),
        )

    async def _do_usage(
        self, state: SessionState, action: dict[str, Any], *, usage: dict[str, int], **_: Any
    ) -> None:
        tokens_in, tokens_out = (
            int(action.get("input_tokens", 0)),
            int(action.get("output_tokens", 0)),
        )
        usage["input"] = usage.get("input", 0) + tokens_in
        usage["output"] = usage.get("output", 0) + tokens_out
        state.cost += float(action.get("cost", 0.0))
        state.context_used += tokens_in + tokens_out
        update = UsageUpdate(
            session_update="usage_update",
            used=state.context_used,
            size=int(action.get("context_size", 200_000)),
            cost=Cost(amount=round(state.cost, 10), currency="USD"),
        )
        await self._conn.session_update(session_id=state.session_id, update=update)

    async def _do_sleep(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        await self._wait_cancel(state, float(action.get("seconds", 0)))

    async def _do_stream(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        text = str(action.get("text", "x"))
        numbered = bool(action.get("numbered"))
        update = update_agent_message_text(text)
        for i in range(int(action.get("count", 1))):
            if state.cancel.is_set():
                raise Cancelled
            if numbered:
                update = update_agent_message_text(f"{text}{i}\n")
            await self._conn.session_update(session_id=state.session_id, update=update)

    async def _do_slow_stream(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        for i in range(int(action.get("count", 1))):
            await self._say(state, str(action.get("text", f"tick {i}\n")))
            await self._wait_cancel(state, float(action.get("interval", 0.5)))

    async def _do_huge_message(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        await self._say(state, "y" * int(action.get("bytes", 5_000_000)))

    async def _do_hang(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        await self._wait_cancel(state, None)

    # ---- misbehaviour

    async def _do_stderr(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        sys.stderr.write(str(action.get("text", "")) * int(action.get("repeat", 1)) + "\n")
        sys.stderr.flush()

    async def _do_stdout_garbage(
        self, state: SessionState, action: dict[str, Any], **_: Any
    ) -> None:
        if self._stdout is not None:  # the SDK's own writer, so the line never splits a message
            self._stdout.write((str(action.get("text", "not json")) + "\n").encode())
            await self._stdout.drain()

    async def _do_crash(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        sys.stderr.flush()
        os._exit(int(action.get("exit_code", 1)))

    # ---- tools

    def _tool_id(self) -> str:
        self._tool_ids += 1
        return f"call-{self._tool_ids}"

    def _path(self, state: SessionState, path: str) -> str:
        path = os.path.expanduser(path)
        return path if os.path.isabs(path) else os.path.join(state.cwd, path)

    async def _do_mcp(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        """List the tools of an MCP server given at session/new (stdio, or streamable HTTP)
        and call one of them."""
        name, tool = str(action["server"]), str(action["tool"])
        arguments = dict(action.get("arguments") or {})
        tc = self._tool_id()
        sid = state.session_id
        await self._conn.session_update(
            session_id=sid,
            update=start_tool_call(tc, f"mcp {name}.{tool}", kind="other", status="in_progress",
                                   raw_input={"server": name, "tool": tool,
                                              "arguments": arguments}),
        )
        server = next((s for s in state.mcp_servers if getattr(s, "name", None) == name), None)
        try:
            if server is None:
                given = [getattr(s, "name", "?") for s in state.mcp_servers]
                raise RuntimeError(f"no MCP server {name!r} in this session (given: {given})")
            tools, text = await self._race(state, _call_mcp_tool(server, tool, arguments))
        except Cancelled:
            await self._conn.session_update(session_id=sid,
                                            update=update_tool_call(tc, status="failed"))
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is reported as the tool's

            await self._conn.session_update(session_id=sid,
                                            update=update_tool_call(tc, status="failed"))
            await self._say(state, f"mcp failed: {_describe(exc)}")
            return
        await self._conn.session_update(
            session_id=sid,
            update=update_tool_call(tc, status="completed",
                                    content=[tool_content(text_block(text))],
                                    raw_output={"tools": tools, "result": text}),
        )
        if action.get("save_to"):
            await self._conn.write_text_file(session_id=sid, content=text,
                                             path=self._path(state, str(action["save_to"])))
        if action.get("echo"):
            await self._say(state, text)

    async def _do_shell(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        command = str(action["command"])
        tc = self._tool_id()
        sid = state.session_id
        await self._conn.session_update(
            session_id=sid,
            update=start_tool_call(
                tc, command, kind="execute", status="in_progress", raw_input={"command": command}
            ),
        )
        if action.get("via", "terminal") == "local":
            exit_code, output = await self._local_shell(state, command)
        else:
            term = await self._conn.create_terminal(
                session_id=sid,
                command="sh",
                args=["-c", command],
                cwd=state.cwd,
                output_byte_limit=action.get("output_limit"),
            )
            await self._conn.session_update(
                session_id=sid,
                update=update_tool_call(tc, content=[tool_terminal_ref(term.terminal_id)]),
            )
            try:
                exit_status = await self._race(
                    state,
                    self._conn.wait_for_terminal_exit(session_id=sid, terminal_id=term.terminal_id),
                )
            except Cancelled:
                await self._conn.kill_terminal(session_id=sid, terminal_id=term.terminal_id)
                await self._conn.release_terminal(session_id=sid, terminal_id=term.terminal_id)
                await self._conn.session_update(
                    session_id=sid, update=update_tool_call(tc, status="failed")
                )
                raise
            out = await self._conn.terminal_output(session_id=sid, terminal_id=term.terminal_id)
            await self._conn.release_terminal(session_id=sid, terminal_id=term.terminal_id)
            exit_code, output = exit_status.exit_code, out.output
        await self._conn.session_update(
            session_id=sid,
            update=update_tool_call(
                tc,
                status="completed" if exit_code == 0 else "failed",
                content=[tool_content(text_block(output))],
                raw_output={"exit_code": exit_code, "output": output},
            ),
        )

    async def _local_shell(self, state: SessionState, command: str) -> tuple[int | None, str]:
        proc = await asyncio.create_subprocess_shell(
            command,
            cwd=state.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            out, _ = await self._race(state, proc.communicate())
        except Cancelled:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            raise
        return proc.returncode, out.decode("utf-8", "replace")

    async def _do_write_file(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        path, content = self._path(state, str(action["path"])), str(action.get("content", ""))
        tc = self._tool_id()
        sid = state.session_id
        await self._conn.session_update(
            session_id=sid,
            update=start_tool_call(
                tc, f"write {path}", kind="edit", status="in_progress", raw_input={"path": path}
            ),
        )
        status = "completed"
        try:
            if action.get("via", "fs") == "local":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
                Path(path).write_text(content)
            else:
                await self._conn.write_text_file(session_id=sid, path=path, content=content)
        except (RequestError, OSError) as exc:
            status = "failed"
            await self._say(state, f"write failed: {_describe(exc)}")
        await self._conn.session_update(
            session_id=sid,
            update=update_tool_call(tc, status=status, content=[tool_diff_content(path, content)]),
        )

    async def _do_read_file(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        path = self._path(state, str(action["path"]))
        tc = self._tool_id()
        sid = state.session_id
        await self._conn.session_update(
            session_id=sid,
            update=start_tool_call(
                tc, f"read {path}", kind="read", status="in_progress", raw_input={"path": path}
            ),
        )
        try:
            if action.get("via", "fs") == "local":
                content = Path(path).read_text()
            else:
                resp = await self._conn.read_text_file(
                    session_id=sid, path=path, line=action.get("line"), limit=action.get("limit")
                )
                content = resp.content
        except (RequestError, OSError) as exc:
            await self._conn.session_update(
                session_id=sid, update=update_tool_call(tc, status="failed")
            )
            await self._say(state, f"read failed: {_describe(exc)}")
            return
        await self._conn.session_update(
            session_id=sid,
            update=update_tool_call(
                tc, status="completed", content=[tool_content(text_block(content))]
            ),
        )
        if action.get("echo"):
            await self._say(state, content)

    async def _do_permission(self, state: SessionState, action: dict[str, Any], **_: Any) -> None:
        options = [
            PermissionOption(option_id=o["id"], name=o.get("name", o["id"]), kind=o["kind"])
            for o in action.get("options") or _DEFAULT_OPTIONS
        ]
        tool_call = ToolCallUpdate(
            tool_call_id=self._tool_id(),
            title=str(action.get("title", "permission")),
            kind=action.get("kind", "other"),
            status="pending",
        )
        resp = await self._race(
            state,
            self._conn.request_permission(
                session_id=state.session_id, tool_call=tool_call, options=options
            ),
        )
        outcome = resp.outcome
        chosen = next(
            (
                o
                for o in options
                if isinstance(outcome, AllowedOutcome) and o.option_id == outcome.option_id
            ),
            None,
        )
        if chosen is None or chosen.kind.startswith("reject"):
            await self._say(state, "permission denied")
            if action.get("on_deny") == "stop":
                raise StopTurn
        else:
            await self._say(state, f"permission granted: {chosen.option_id}")

    # ---- cancellation helpers

    async def _wait_cancel(self, state: SessionState, seconds: float | None) -> None:
        """Sleep `seconds` (forever when None); raise `Cancelled` if session/cancel arrives."""
        try:
            await asyncio.wait_for(state.cancel.wait(), timeout=seconds)
        except asyncio.TimeoutError:  # noqa: UP041 - distinct from TimeoutError before 3.11
            return
        raise Cancelled

    async def _race(self, state: SessionState, awaitable: Any) -> Any:
        """Await `awaitable` unless session/cancel arrives first (then raise `Cancelled`)."""
        work = asyncio.ensure_future(awaitable)
        cancel = asyncio.ensure_future(state.cancel.wait())
        done, _ = await asyncio.wait({work, cancel}, return_when=asyncio.FIRST_COMPLETED)
        if work in done:
            cancel.cancel()
            return work.result()
        work.cancel()
        raise Cancelled


_DEFAULT_OPTIONS = [
    {"id": "allow-once", "name": "Allow once", "kind": "allow_once"},
    {"id": "allow-always", "name": "Always allow", "kind": "allow_always"},
    {"id": "reject-once", "name": "Reject", "kind": "reject_once"},
    {"id": "reject-always", "name": "Always reject", "kind": "reject_always"},
]


@contextlib.asynccontextmanager
async def _mcp_streams(server: Any) -> Any:
    """The (read, write) streams to `server`: a subprocess for stdio, else streamable HTTP."""
    if getattr(server, "url", None):
        from mcp.client import streamable_http

        headers = {h.name: h.value for h in (getattr(server, "headers", None) or [])}
        async with streamable_http.streamablehttp_client(server.url, headers=headers or None) \
                as (read, write, _):
            yield read, write
        return
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {e.name: e.value for e in (getattr(server, "env", None) or [])}
    params = StdioServerParameters(command=server.command, args=list(server.args or []),
                                   env={**os.environ, **env})
    async with stdio_client(params) as (read, write):
        yield read, write


async def _call_mcp_tool(server: Any, tool: str, arguments: dict[str, Any]
                         ) -> tuple[list[str], str]:
    """(the server's tool names, the text of `tool`'s result), through the `mcp` SDK (which the
    task image provides: the agent's own install does not carry it)."""
    from mcp import ClientSession

    async with _mcp_streams(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        result = await session.call_tool(tool, arguments)
    text = "".join(getattr(block, "text", "") for block in result.content)
    if result.isError:
        raise RuntimeError(f"tool {tool!r} failed: {text}")
    return [t.name for t in listed.tools], text


def _describe(exc: Exception) -> str:
    while len(getattr(exc, "exceptions", None) or ()) == 1:  # a task group's one failure
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    data = getattr(exc, "data", None)
    return f"{exc} {json.dumps(data)}" if data else str(exc)


def _usage(usage: dict[str, int]) -> Usage | None:
    if not usage:
        return None
    return Usage(
        input_tokens=usage["input"],
        output_tokens=usage["output"],
        total_tokens=usage["input"] + usage["output"],
    )


async def main() -> None:
    reader, writer = await stdio_streams(limit=STDIO_LIMIT)
    sys.stdout = sys.stderr  # a stray print() must never corrupt the JSON-RPC stream
    await run_agent(ScriptedAgent(writer), writer, reader)


if __name__ == "__main__":
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING, format="scripted-agent: %(message)s"
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
