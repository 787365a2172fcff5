"""The client side of the tool server: a session over HTTP, and starting a server.

```python
async with ToolClient("http://127.0.0.1:18890") as client:
    session = await client.open(["doc:read"], kwargs={"seed_path": "/data/plan.pdf"})
    result = await session.call("doc:read", {"page": 2})
```
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from benchflow.errors import ConfigError, ToolServerError
from benchflow.tools.base import ToolResult, check_tool_names


def _unreachable(url: str, exc: Exception) -> ToolServerError:
    return ToolServerError(f"the tool server at {url} is unreachable ({type(exc).__name__}): "
                           "start it with `benchflow tools serve --port PORT`, or set "
                           "sandbox_auto_start: true", transient=True)


@dataclass
class RemoteSession:
    """A session on the server: its id and its tools' descriptions."""

    client: ToolClient
    id: str
    tools: list[dict[str, Any]] = field(default_factory=list)

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI `tools=` entries (function names without ':')."""
        return [{"type": "function", "function": {
            "name": t["function_name"], "description": t["description"],
            "parameters": t["parameters"]}} for t in self.tools]

    def tool_name(self, function_name: str) -> str | None:
        return next((t["name"] for t in self.tools if t["function_name"] == function_name
                     or t["name"] == function_name), None)

    async def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """One call. Raises ToolServerError when the server is gone."""
        data = await self.client.request("POST", f"/sessions/{self.id}/call",
                                         {"name": name, "arguments": dict(arguments)})
        return ToolResult.from_json(data)

    async def close(self) -> None:
        try:
            await self.client.request("DELETE", f"/sessions/{self.id}")
        except ToolServerError:
            pass  # the server is gone: nothing left to close

    @property
    def mcp_url(self) -> str:
        """The session's tools as an MCP (streamable HTTP) server, for ACP agents."""
        return f"{self.client.url}/mcp?session={self.id}"


class ToolClient:
    """An HTTP client of one tool server."""

    def __init__(self, url: str, timeout_sec: float = 180.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout_sec, trust_env=False)

    async def __aenter__(self) -> ToolClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._http.aclose()

    async def request(self, method: str, path: str, body: Any = None) -> Any:
        """A JSON request.

        Raises:
            ToolServerError: unreachable, or an unexpected answer.
            ConfigError: the server refused the request (400: unknown tool, bad field).
        """
        try:
            reply = await self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise _unreachable(self.url, exc) from exc
        try:
            data = reply.json()
        except ValueError:
            data = {"error": reply.text[:300]}
        if reply.status_code == 400:
            raise ConfigError(f"tool server {self.url}: {data.get('error')}")
        if reply.status_code >= 300:
            raise ToolServerError(f"tool server {self.url} answered {reply.status_code} to "
                                  f"{method} {path}: {data.get('error', data)}")
        return data

    async def health(self) -> dict[str, Any]:
        data: dict[str, Any] = await self.request("GET", "/health")
        return data

    async def open(self, tools: Sequence[str], *, resource_types: Sequence[str] = (),
                   init_configs: Mapping[str, Any] | None = None,
                   kwargs: Mapping[str, Any] | None = None,
                   timeout_sec: float = 120.0) -> RemoteSession:
        """A new session with `tools` (known names: an unknown one is a ConfigError)."""
        check_tool_names(list(tools))
        data = await self.request("POST", "/sessions", {
            "tools": list(tools), "resource_types": list(resource_types),
            "resource_init_configs": dict(init_configs or {}), "kwargs": dict(kwargs or {}),
            "timeout_sec": timeout_sec})
        return RemoteSession(self, str(data["session_id"]), list(data["tools"]))


class ToolServerProcess:
    """`python -m benchflow.tools.server` on the URL's port (AgentFlow's `sandbox_auto_start`)."""

    def __init__(self, url: str, config_path: str | None = None) -> None:
        parts = urlsplit(url)
        if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
            raise ConfigError(f"sandbox_auto_start starts a server on this machine: "
                              f"sandbox_server_url must be http://127.0.0.1:PORT (got {url})")
        self.url, self.port, self.config_path = url.rstrip("/"), parts.port, config_path
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_sec: float = 60.0) -> str:
        """Start it and wait until /health answers; returns the URL.

        Raises:
            ToolServerError: the port is taken or the server exited.
        """
        argv = [sys.executable, "-m", "benchflow.tools.server", "--port", str(self.port)]
        if self.config_path:
            argv += ["--config", self.config_path]
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout_sec
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = (self._proc.stderr.read() if self._proc.stderr else b"").decode()[-500:]
                raise ToolServerError(f"the tool server on port {self.port} exited: {err}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1.0, trust_env=False).is_success:
                    return self.url
            except httpx.HTTPError:
                pass
            time.sleep(0.1)  # polling a child process's port; not a test's sync
        self.stop()
        raise ToolServerError(f"the tool server on port {self.port} did not answer in "
                              f"{timeout_sec:g} s")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc is not None and self._proc.stderr is not None:
            self._proc.stderr.close()
        self._proc = None


__all__ = ["RemoteSession", "ToolClient", "ToolServerProcess"]
