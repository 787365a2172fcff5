"""The `ors-episode` verifier strategy: the task is an Open Reward Standard environment.

```markdown
---
strategy: ors-episode
environment: env.py:GuessNumber   # a file in verifier/ and its openreward Environment class
split: test                       # the task's split and index in the environment
task_index: 0
---
```

Before the agent's first turn benchflow serves the environment with the `openreward`
package (`openreward.environments.Server`) on 127.0.0.1 in a process of its own, opens a
session on the task and gives the agent the environment's prompt and tools. Every tool
call goes to the environment; its rewards arrive with the tool outputs, and an output with
`finished=True` ends the episode (the agent's turn stops; an environment with a terminal
tool receives the agent's final message there). Rewards: `reward` is the episode's return
(the sum of the rewards), `ors.steps` the tool calls made, `ors.finished` 1 or 0.

The model agent (`-a model`) plays the episode; the environment's tools are its tools.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchflow._extras import require
from benchflow.errors import ConfigError, TaskInvalidError, VerifierError
from benchflow.task import Task
from benchflow.tools.base import ToolResult

log = logging.getLogger(__name__)

_SERVE = ("import sys; sys.path.insert(0, sys.argv[1]); import importlib; "
          "cls = getattr(importlib.import_module(sys.argv[2]), sys.argv[3]); "
          "from openreward.environments import Server; "
          "Server([cls]).run(host='127.0.0.1', port=int(sys.argv[4]))")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class OrsEpisode:
    """One episode against the task's ORS environment (see the module docstring)."""

    url: str
    env_name: str
    split: str
    index: int
    prompt_text: str = ""
    rewards_seen: list[float] = field(default_factory=list)
    finished: bool = False
    terminal: Any = None
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _api: Any = field(default=None, repr=False)
    _session: Any = field(default=None, repr=False)
    _tools: list[dict[str, Any]] = field(default_factory=list, repr=False)

    # -- the model agent's side (a tool provider) ------------------------------------------

    def schemas(self) -> list[dict[str, Any]]:
        return [{"type": "function", "function": {
            "name": t["name"], "description": t.get("description", ""),
            "parameters": t.get("parameters") or {"type": "object", "properties": {}}}}
            for t in self._tools]

    def tool_name(self, function_name: str) -> str | None:
        return function_name if any(t["name"] == function_name for t in self._tools) else None

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """One tool call; its reward is kept, `finished=True` ends the episode."""
        if self.finished:
            return ToolResult("error: the episode is over", is_error=True)
        try:
            output = await self._session.call_tool(name, dict(arguments))
        except Exception as exc:  # noqa: BLE001 - the environment's errors go to the model
            return ToolResult(f"error: {name}: {exc}", is_error=True)
        return self._record(output)

    async def finish(self, message: str) -> None:
        """The agent's final message, routed into the terminal tool when there is one."""
        if self.finished or self.terminal is None:
            return
        arg = getattr(self.terminal, "arg", None)
        args = {arg: message} if arg else {}
        self._record(await self._session.call_tool(self.terminal.name, args))

    def _record(self, output: Any) -> ToolResult:
        if output.reward is not None:
            self.rewards_seen.append(float(output.reward))
        self.finished = self.finished or bool(output.finished)
        text = "\n".join(getattr(b, "text", "") for b in output.blocks if
                         getattr(b, "type", "") == "text")
        note = f"\n[reward {output.reward}]" if output.reward is not None else ""
        return ToolResult(text + note + ("\n[episode finished]" if output.finished else ""))

    # -- the verifier's side ---------------------------------------------------------------

    def rewards(self) -> dict[str, float]:
        return {"reward": round(sum(self.rewards_seen), 6),
                "ors.steps": float(len(self.rewards_seen)),
                "ors.finished": 1.0 if self.finished else 0.0}

    async def aclose(self) -> None:
        try:
            if self._session is not None:
                await self._session.__aexit__(None, None, None)
            if self._api is not None:
                await self._api.__aexit__(None, None, None)
        except Exception as exc:  # noqa: BLE001 - closing must not fail the rollout
            log.warning("closing the ORS session failed: %s", exc)
        finally:
            self._session = self._api = None
            if self._process is not None and self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None


def _target(task: Task) -> tuple[Path, str, str]:
    doc = task.verifier_doc
    if not doc.environment or ":" not in doc.environment:
        raise TaskInvalidError(f"{task.verifier_dir / 'verifier.md'}: environment: an "
                               "ors-episode needs `environment: <file.py>:<Class>` (a file in "
                               "verifier/ defining an openreward Environment)")
    file, _, cls = doc.environment.partition(":")
    path = (task.verifier_dir / file).resolve()
    if not path.is_file() or task.verifier_dir.resolve() not in path.parents:
        raise TaskInvalidError(f"{task.verifier_dir / file}: the ORS environment file is "
                               "missing (it must be inside verifier/)")
    return path.parent, path.stem, cls


async def start_episode(task: Task, log_path: Path, timeout_sec: float = 60.0) -> OrsEpisode:
    """Serve the task's environment on 127.0.0.1 and open its episode.

    Raises:
        ConfigError: the `ors` extra is missing. TaskInvalidError: a bad `environment`.
        VerifierError: the environment server did not start or refused the session.
    """
    import anyio
    import httpx

    require("openreward", "ors", "the ors-episode verifier strategy")
    folder, module, cls = _target(task)
    port = _free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as sink:
        process = subprocess.Popen([sys.executable, "-c", _SERVE, str(folder), module, cls,
                                    str(port)], stdin=subprocess.DEVNULL, stdout=sink,
                                   stderr=subprocess.STDOUT, cwd=folder)
    url = f"http://127.0.0.1:{port}"
    episode = OrsEpisode(url=url, env_name=cls.lower(), split=task.verifier_doc.split,
                         index=task.verifier_doc.task_index, _process=process)
    try:
        deadline = time.monotonic() + timeout_sec
        async with httpx.AsyncClient(trust_env=False) as client:
            while True:
                if process.poll() is not None:
                    raise VerifierError(f"the ORS environment server exited (code "
                                        f"{process.returncode}); see {log_path}")
                try:
                    if (await client.get(f"{url}/health", timeout=2)).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise VerifierError(f"the ORS environment server did not answer in "
                                        f"{timeout_sec:g} s; see {log_path}")
                await anyio.sleep(0.2)  # polling a child process's port
        from openreward.api.environments.client import AsyncEnvironmentsAPI

        episode._api = AsyncEnvironmentsAPI(base_url=url, api_key=None)
        env = episode._api.get(episode.env_name, base_url=url)
        session = env.session(split=episode.split, index=episode.index)
        episode._session = await session.__aenter__()
        blocks = await session.get_prompt()
        episode.prompt_text = "\n".join(getattr(b, "text", "") for b in blocks)
        episode._tools = list(await session.list_tools(format="openai"))
        episode.terminal = await session.terminal_tool()
    except BaseException as exc:
        await episode.aclose()
        if isinstance(exc, (VerifierError, ConfigError)):
            raise
        if isinstance(exc, Exception):
            raise VerifierError(f"the ORS episode could not start: {exc}") from exc
        raise
    return episode


__all__ = ["OrsEpisode", "start_episode"]
