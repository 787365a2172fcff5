"""The built-in `model` agent: benchflow's own tool-calling loop on an OpenAI-compatible model.

`benchflow run TASK -a model -m MODEL --model-base-url URL [--model-api-key-env VAR]`

Each prompt is a user message (the first one is the task instruction); the model answers,
calls tools (`shell`, `read_file`, `write_file`, run in the sandbox as the agent user; and
the tool server's `web:search`, `web:browse`, `doc:read`, `code:run`, `vm:*`, called over
HTTP in one session per connection, with the item's kwargs) and sees their output, until it answers without a tool call or `max_turns` model calls are
spent. Consecutive steps of one role share the conversation. Everything goes to the same
trajectory schema as ACP agents: user_message, agent_message, tool_call and
tool_call_update (with the real output), usage. With no tools it needs no sandbox.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from benchflow._models import FrozenModel
from benchflow.agents.base import BUILTIN_CAPABILITIES, AgentConnection, AgentContext, StepOutcome
from benchflow.agents.model_tools import TOOL_NAMES, TOOL_SCHEMAS, ToolRunner
from benchflow.config import Role
from benchflow.errors import ConfigError
from benchflow.steps import Step
from benchflow.tools.base import TOOL_NAMES as SERVER_TOOLS
from benchflow.trajectory.events import Usage as EventUsage

DEFAULT_SYSTEM_PROMPT = (
    "You are a capable assistant. Answer the user's request. When tools are available, use "
    "them to inspect and change the sandbox; when you are done, reply with your final answer "
    "and no tool call.")


class ToolServerSettings(FrozenModel):
    """Where the model agent's server tools run (`benchflow tools serve`) and the session's
    resource settings (AgentFlow's `resource_types` / `resource_init_configs`)."""

    url: str = Field(default="http://127.0.0.1:18890", pattern=r"^https?://")
    resource_types: list[str] = Field(default_factory=list)
    resource_init_configs: dict[str, Any] = Field(default_factory=dict)


class ModelAgentConfig(FrozenModel):
    """How the model agent behaves (tools, limits, prompts)."""

    tools: list[str] = Field(default_factory=lambda: list(TOOL_NAMES))
    """Sandbox tools (`shell`, `read_file`, `write_file`) and tool-server tools (`web:search`...)."""
    tool_server: ToolServerSettings = ToolServerSettings()
    max_turns: int = Field(default=30, ge=1, description="model calls per prompt")
    system_prompt: str = ""
    system_prompt_file: Path | None = None
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_retries: int = Field(default=3, ge=0)
    timeout_sec: float = Field(default=120.0, gt=0, description="per model call")
    tool_timeout_sec: float = Field(default=120.0, gt=0)
    max_output_chars: int = Field(default=20_000, ge=200)
    price_per_mtok: tuple[float, float] | None = Field(
        default=None, description="USD per million (input, output) tokens: result.json's cost")

    @model_validator(mode="after")
    def _one_prompt(self) -> ModelAgentConfig:
        if self.system_prompt and self.system_prompt_file:
            raise ValueError("give system_prompt or system_prompt_file, not both")
        if len(set(self.tools)) != len(self.tools):
            raise ValueError(f"tools listed twice: {self.tools}")
        for name in self.tools:
            if name not in TOOL_NAMES and name not in SERVER_TOOLS:
                raise ValueError(unknown_tool(name))
        return self

    @property
    def local_tools(self) -> list[str]:
        """The tools run in the rollout's sandbox."""
        return [t for t in self.tools if t in TOOL_NAMES]

    @property
    def server_tools(self) -> list[str]:
        """The tools run by the tool server."""
        return [t for t in self.tools if t in SERVER_TOOLS]

    def resolved_system_prompt(self) -> str:
        """The system prompt text (from the file when one is named).

        Raises:
            ConfigError: the file cannot be read.
        """
        if self.system_prompt_file is not None:
            try:
                return self.system_prompt_file.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigError(f"system_prompt_file {self.system_prompt_file}: {exc}") from exc
        return self.system_prompt or DEFAULT_SYSTEM_PROMPT


def check_tools(names: list[str], where: str = "tools") -> list[str]:
    """The names as model-agent tools.

    Raises:
        ConfigError: a name is not one of the model agent's tools.
    """
    for name in names:
        if name not in TOOL_NAMES and name not in SERVER_TOOLS:
            raise ConfigError(f"{where}: {unknown_tool(name)}")
    return list(names)


def unknown_tool(name: str) -> str:
    """Why `name` is not a model-agent tool, naming the nearest and every known tool."""
    from benchflow._suggest import suggest

    known = [*TOOL_NAMES, *SERVER_TOOLS]
    near = suggest(name, known)
    hint = f" (did you mean {near!r}?)" if near else ""
    return f"unknown tool {name!r}{hint}; known tools: {', '.join(known)}"


_SERVER_KIND = {"web": "fetch", "doc": "read", "code": "execute", "vm": "other"}


class ModelConnection:
    """One conversation with the model; consecutive prompts extend it."""

    def __init__(self, ctx: AgentContext, role: Role, scene: str, config: ModelAgentConfig,
                 client: Any) -> None:
        self.ctx, self.role, self.scene, self.config, self.client = ctx, role, scene, config, client
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": config.resolved_system_prompt()}]
        self.tools = [TOOL_SCHEMAS[name] for name in config.local_tools]
        self.remote: Any = None
        """The tool server session (`benchflow.tools.RemoteSession`) of the server tools."""
        self.runner: ToolRunner | None = None
        if config.local_tools:
            self.runner = ToolRunner(ctx.require_sandbox("the model agent's tools"),
                                     user=ctx.agent_user, workdir=ctx.workdir,
                                     timeout_sec=ctx.scaled(config.tool_timeout_sec),
                                     max_output_chars=config.max_output_chars)

    def _record(self, type: str, step: Step, round: int | None, **fields: Any) -> None:
        if self.ctx.trajectory is not None:
            self.ctx.trajectory.record(type, scene=step.scene, role=step.role.name,
                                       turn=step.turn_index, session_turn=step.session_turn,
                                       round=round, **fields)

    async def prompt(self, step: Step, round: int | None = None) -> StepOutcome:
        prompt = step.prompt or self.ctx.task.instruction
        extra = getattr(self.remote, "prompt_text", "")
        if extra and len(self.messages) == 1:  # the environment's own prompt, once
            prompt = f"{prompt}\n\n{extra}"
        self.messages.append({"role": "user", "content": prompt})
        self._record("user_message", step, round, text=prompt)
        outcome = StepOutcome(stop_reason="max_turns")
        for _ in range(self.config.max_turns):
            reply = await self.client.chat(self.messages, tools=self.tools or None,
                                           model=self.role.model,
                                           temperature=self.config.temperature)
            outcome.input_tokens += reply.usage.input
            outcome.output_tokens += reply.usage.output
            outcome.reported_usage = outcome.reported_usage or bool(
                reply.usage.input or reply.usage.output)
            if reply.usage.cost is not None:
                outcome.cost = (outcome.cost or 0.0) + reply.usage.cost
            self._record("usage", step, round, scope="turn",
                         usage=EventUsage(input_tokens=reply.usage.input,
                                          output_tokens=reply.usage.output,
                                          cost=reply.usage.cost))
            self.messages.append(reply.as_message())
            if reply.text:
                outcome.agent_text = reply.text
                self._record("agent_message", step, round, text=reply.text, update={
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": reply.text}})
            if not reply.tool_calls:
                outcome.stop_reason = "end_turn"
                if hasattr(self.remote, "finish"):  # an ORS terminal tool takes the answer
                    await self.remote.finish(reply.text)
                break
            for call in reply.tool_calls:
                outcome.n_tool_calls += 1
                await self._call_tool(call, step, round)
            if getattr(self.remote, "finished", False):  # the environment ended the episode
                outcome.stop_reason = "end_turn"
                break
        return outcome

    async def open_tools(self) -> None:
        """Open the tool server session (the item's kwargs reach its tools).

        Raises:
            ToolServerError: the server is unreachable or refused the session.
            ConfigError: it does not know a tool.
        """
        episode = self.ctx.ors_episode
        if episode is not None:  # an ORS environment's tools (verify/ors.py)
            self.remote = episode
            self.tools += episode.schemas()
            return
        if not self.config.server_tools:
            return
        from benchflow.tools.client import ToolClient

        server = self.config.tool_server
        client = ToolClient(server.url)
        try:
            self.remote = await client.open(
                self.config.server_tools, resource_types=server.resource_types,
                init_configs=server.resource_init_configs,
                kwargs=dict(self.ctx.task_input),
                timeout_sec=self.ctx.scaled(self.config.tool_timeout_sec))
        except BaseException:
            await client.__aexit__(None, None, None)
            raise
        self.tools += self.remote.schemas()

    async def close_tools(self) -> None:
        if self.remote is not None and hasattr(self.remote, "client"):  # the rollout
            await self.remote.close()  # closes an ORS episode, not its agent
            await self.remote.client.__aexit__(None, None, None)
        self.remote = None

    async def _run(self, call: Any) -> tuple[str, bool, tuple[bytes, ...]]:
        """(output, failed, PNG images) of one call, wherever the tool runs."""
        server_name = self.remote.tool_name(call.name) if self.remote is not None else None
        if server_name is not None:
            result = await self.remote.call(server_name, call.arguments)
            return result.text, result.is_error, result.images
        if self.runner is None or call.name not in self.config.local_tools:
            return (f"error: no tool {call.name!r} here (tools: "
                    f"{', '.join(self.config.tools) or 'none'})"), True, ()
        output, failed = await self.runner.run(call.name, call.arguments)
        return output, failed, ()

    async def _call_tool(self, call: Any, step: Step, round: int | None) -> None:
        server_name = self.remote.tool_name(call.name) if self.remote is not None else None
        kind = ToolRunner.kind(call.name) if server_name is None else _SERVER_KIND.get(
            server_name.split(":")[0], "other")
        shown = server_name or call.name
        title = f"{shown} {json.dumps(call.arguments, ensure_ascii=False)[:200]}"
        self._record("tool_call", step, round, tool_call_id=call.id, title=title, kind=kind,
                     status="pending", update={"sessionUpdate": "tool_call",
                                               "toolCallId": call.id, "title": title,
                                               "kind": kind, "status": "pending",
                                               "rawInput": call.arguments})
        output, failed, images = await self._run(call)
        status = "failed" if failed else "completed"
        content: list[dict[str, Any]] = [{"type": "content",
                                          "content": {"type": "text", "text": output}}]
        content += [{"type": "content", "content": {"type": "image", "mimeType": "image/png",
                                                     "data": base64.b64encode(png).decode()}}
                    for png in images]
        raw: dict[str, Any] = {"output": output}
        if server_name is not None:
            raw["tool"] = server_name
        if images:
            raw["images"] = [{"mime_type": "image/png", "bytes": len(png)} for png in images]
        self._record("tool_call_update", step, round, tool_call_id=call.id, status=status,
                     update={"sessionUpdate": "tool_call_update", "toolCallId": call.id,
                             "status": status, "content": content, "rawOutput": raw})
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        if images:  # tool messages carry text only: the images follow as the user's
            self.messages.append({"role": "user", "content": [
                {"type": "text", "text": f"The image(s) returned by {shown}:"},
                *({"type": "image_url", "image_url": {
                    "url": "data:image/png;base64," + base64.b64encode(png).decode()}}
                  for png in images)]})


class ModelAgent:
    """Driver of the built-in model agent (see the module docstring)."""

    name = "model"
    capabilities = BUILTIN_CAPABILITIES

    def __init__(self, config: ModelAgentConfig | None = None) -> None:
        self.config = config or ModelAgentConfig()

    @property
    def needs_sandbox(self) -> bool:
        """Only its sandbox tools run in a sandbox (the tool server's run elsewhere)."""
        return bool(self.config.local_tools)

    async def install(self, ctx: AgentContext) -> None:
        """Create the non-root user the tools run as (nothing to install otherwise)."""
        self.config.resolved_system_prompt()  # a missing prompt file fails before any call
        if self.config.local_tools and ctx.sandbox is not None:
            from benchflow.agents.acp_driver import ensure_agent_user

            await ensure_agent_user(ctx)

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        from benchflow.models import ModelClient, Price

        endpoint = ctx.model_endpoint
        if endpoint is None or endpoint.base_url is None:
            raise ConfigError("the model agent needs a model endpoint: --model-base-url URL "
                              "(or --model-server SCRIPT)")
        if not role.model and not endpoint.model:
            raise ConfigError("the model agent needs a model id: -m MODEL")
        price = self.config.price_per_mtok
        model = role.model or endpoint.model or ""
        async with ModelClient(endpoint, max_retries=self.config.max_retries,
                               timeout_sec=self.config.timeout_sec,
                               prices={model: Price(*price)} if price else {},
                               api_key=ctx.model_keys.get(role.name)) as client:
            connection = ModelConnection(ctx, role, scene, self.config, client)
            await connection.open_tools()
            try:
                yield connection
            finally:
                await connection.close_tools()


__all__ = ["DEFAULT_SYSTEM_PROMPT", "ModelAgent", "ModelAgentConfig", "ModelConnection",
           "ToolServerSettings", "check_tools", "unknown_tool"]
