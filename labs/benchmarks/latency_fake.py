"""A cloud sandbox backend that only waits: for measuring the orchestrator, not a cloud.

`LatencyProvider` (registered as `latency-fake`) makes sandboxes whose every call sleeps
for a typical cloud latency and does nothing else: create 1.5 s (from a snapshot), each
exec, upload and download one 50 ms round trip. Files live in a dict (the verifier's
test.sh "writes" reward 1). `open_process` plays an in-memory ACP agent that answers the
handshake and streams `updates` session/update notifications per prompt (message chunks
and tool calls) over `turn_sec` seconds, in reads of 20 lines as a socket delivers them,
so benchflow's real ACP client, recorder and trajectory writer do their full work (the
agent's own side is cheap: a turn's update lines are encoded once and replayed, while
benchflow parses every line it receives). `BenchAcpDriver` connects to it with the real `AcpSession`.

No container, socket or subprocess is involved: what the benchmark measures is benchflow.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from benchflow.agents.acp_driver import AcpConnection
from benchflow.agents.base import AgentConnection, AgentContext
from benchflow.config import Role
from benchflow.sandbox.base import ExecResult, SandboxCapabilities
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.spec import SandboxSpec
from benchflow.verify._scripts import _BEFORE_DONE

CREATE_SEC = 1.5
RTT_SEC = 0.05
UPDATES_PER_TURN = 200
CHUNK_LINES = 20
TURN_SEC = 2.0
"""How long the agent's turn streams (0: the whole turn at once, the worst case)."""
"""Lines per read of the agent's stdout (a socket hands over what has arrived)."""


class Latency:
    """The simulated time one sandbox spent waiting (summed over all its calls)."""

    total = 0.0
    calls = 0

    @classmethod
    async def wait(cls, seconds: float) -> None:
        cls.total += seconds
        cls.calls += 1
        await anyio.sleep(seconds)


class _Send(ByteSendStream):
    def __init__(self, stream: MemoryObjectSendStream[bytes]) -> None:
        self._stream = stream

    async def send(self, item: bytes) -> None:
        await self._stream.send(item)

    async def aclose(self) -> None:
        self._stream.close()


class _Receive(ByteReceiveStream):
    def __init__(self, stream: MemoryObjectReceiveStream[bytes]) -> None:
        self._stream = stream

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._stream.receive()

    async def aclose(self) -> None:
        self._stream.close()


class Park:
    """Holds every agent half-way through its first turn, so that a benchmark or a test can
    look at the process with all rollouts in flight: `arrived` is set once `count` agents
    wait; they go on once `release` is set. Used through `LatencyProvider.park`."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.waiting = 0
        self.arrived = anyio.Event()
        self.release = anyio.Event()

    async def arrive(self) -> None:
        self.waiting += 1
        if self.waiting >= self.count:
            self.arrived.set()
        await self.release.wait()


class InMemoryAgent:
    """A `LiveProcess` whose other end is a coroutine speaking ACP (newline-delimited
    JSON-RPC): initialize, session/new, and `updates` notifications per session/prompt."""

    def __init__(self, tg: anyio.abc.TaskGroup | None, updates: int, turn_sec: float,
                 park: Park | None = None) -> None:
        self._turn_sec = turn_sec
        self._park = park
        self._in_send, in_recv = anyio.create_memory_object_stream[bytes](64)
        out_send, self._out_recv = anyio.create_memory_object_stream[bytes](64)
        err_send, self._err_recv = anyio.create_memory_object_stream[bytes](1)
        self._err_send = err_send
        self._exited = anyio.Event()
        self._code: int | None = None
        if tg is not None:
            tg.start_soon(self._play, in_recv, out_send, updates)
        else:  # no host task group (e.g. on a Ray worker): a plain asyncio task
            self._task = asyncio.get_running_loop().create_task(
                self._play(in_recv, out_send, updates))

    @property
    def stdin(self) -> ByteSendStream:
        return _Send(self._in_send)

    @property
    def stdout(self) -> ByteReceiveStream:
        return _Receive(self._out_recv)

    @property
    def stderr(self) -> ByteReceiveStream:
        return _Receive(self._err_recv)

    @property
    def returncode(self) -> int | None:
        return self._code

    async def wait(self) -> int:
        await self._exited.wait()
        return self._code or 0

    async def kill(self) -> None:
        self._in_send.close()

    async def aclose(self) -> None:
        self._in_send.close()
        await self._exited.wait()
        self._out_recv.close()
        self._err_recv.close()

    async def _play(self, stdin: MemoryObjectReceiveStream[bytes],
                    stdout: MemoryObjectSendStream[bytes], updates: int) -> None:
        buffer = b""
        try:
            async for chunk in stdin:
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        replies = _encoded_answer(json.loads(line), updates)
                        # as a socket delivers them: reads of many lines each, spread
                        # over the turn as a model streams (the last one is the answer)
                        chunks = range(0, len(replies), CHUNK_LINES)
                        for n, i in enumerate(chunks):
                            if i and self._turn_sec:
                                await Latency.wait(self._turn_sec / max(1, len(chunks) - 1))
                            if n == len(chunks) // 2 and n and self._park is not None:
                                park, self._park = self._park, None
                                await park.arrive()
                            await stdout.send(b"".join(replies[i:i + CHUNK_LINES]))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self._code = 0
            stdin.close()
            stdout.close()
            self._err_send.close()
            self._exited.set()


_ENCODED_UPDATES: dict[tuple[str, int], list[bytes]] = {}
"""A turn's update lines, encoded once per (session, count): the benchmark measures
benchflow's side (which parses every line), not the fake agent's JSON encoding."""


def _encoded_answer(message: dict[str, Any], updates: int) -> list[bytes]:
    """`_answer` as wire lines; a prompt's updates come from `_ENCODED_UPDATES`."""
    if message.get("method") != "session/prompt" or "id" not in message:
        return [json.dumps(r).encode() + b"\n" for r in _answer(message, updates)]
    key = (message["params"]["sessionId"], updates)
    if key not in _ENCODED_UPDATES:
        _ENCODED_UPDATES[key] = [json.dumps(_update(key[0], i)).encode() + b"\n"
                                 for i in range(updates)]
    answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"stopReason": "end_turn"}}
    return [*_ENCODED_UPDATES[key], json.dumps(answer).encode() + b"\n"]


def _answer(message: dict[str, Any], updates: int) -> list[dict[str, Any]]:
    """The agent's replies to one client message (notifications from the client: none)."""
    if "id" not in message or "method" not in message:
        return []
    method, rid = message["method"], message["id"]
    if method == "initialize":
        result: dict[str, Any] = {"protocolVersion": 1, "authMethods": [],
                                  "agentCapabilities": {"loadSession": False},
                                  "agentInfo": {"name": "bench-acp", "version": "1.0"}}
    elif method == "session/new":
        result = {"sessionId": "bench-session"}
    elif method == "session/prompt":
        session = message["params"]["sessionId"]
        out = [_update(session, i) for i in range(updates)]
        return [*out, {"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}}]
    else:
        result = {}
    return [{"jsonrpc": "2.0", "id": rid, "result": result}]


def _update(session: str, i: int) -> dict[str, Any]:
    if i % 20 == 10:
        update: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": f"t{i}",
                                  "title": f"step {i}", "kind": "execute", "status": "pending"}
    elif i % 20 == 11:
        update = {"sessionUpdate": "tool_call_update", "toolCallId": f"t{i - 1}",
                  "status": "completed",
                  "content": [{"type": "content", "content": {"type": "text", "text": "ok"}}]}
    else:
        update = {"sessionUpdate": "agent_message_chunk",
                  "content": {"type": "text", "text": f"chunk {i} of the agent's answer. "}}
    return {"jsonrpc": "2.0", "method": "session/update",
            "params": {"sessionId": session, "update": update}}


class LatencySandbox:
    """A sandbox that waits a cloud's latency on every call (see the module docstring)."""

    capabilities = SandboxCapabilities(live_processes=True, root_exec=True)
    backend = "latency-fake"
    image: str | None = "snapshot"

    def __init__(self, spec: SandboxSpec, tg: anyio.abc.TaskGroup | None, updates: int,
                 turn_sec: float, park: Park | None = None) -> None:
        self.spec = spec
        self.workdir = spec.workdir or "/app"
        self.files: dict[str, bytes] = {}
        self._id: str | None = None
        self._tg = tg
        self._updates = updates
        self._turn_sec = turn_sec
        self._park = park

    @property
    def sandbox_id(self) -> str | None:
        return self._id

    async def start(self) -> None:
        await Latency.wait(CREATE_SEC)
        self._id = f"fake-{id(self):x}"
        self.files.update(self.spec.files)
        for tree in self.spec.trees:  # the start's one upload
            self.files.update(await anyio.to_thread.run_sync(_read_tree, tree.src, tree.dst))

    async def exec(self, cmd: Sequence[str], *, user: str | None = None, cwd: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float | None = None
                   ) -> ExecResult:
        await Latency.wait(RTT_SEC)
        if any("test.sh" in part for part in cmd):
            self.files["/logs/verifier/reward.txt"] = b"1\n"
        # a chained exec (verify/_scripts.py, e.g. the verifier folder unpacked before
        # test.sh): its steps before the main command succeed
        done = any(_BEFORE_DONE in part for part in cmd)
        return ExecResult(0, (_BEFORE_DONE + "\n").encode() if done else b"", b"")

    async def upload(self, src: Path, dst: str) -> None:
        await Latency.wait(RTT_SEC)
        # reading and writing local files in a worker thread, as an SDK-backed backend does
        self.files.update(await anyio.to_thread.run_sync(_read_tree, Path(src), dst))

    async def upload_bytes(self, data: bytes, dst: str, mode: int = 0o644) -> None:
        await Latency.wait(RTT_SEC)
        self.files[dst] = data

    async def download(self, src: str, dst: Path) -> None:
        await Latency.wait(RTT_SEC)
        prefix = src.rstrip("/") + "/"
        found = {name[len(prefix):]: data for name, data in self.files.items()
                 if name.startswith(prefix)}
        await anyio.to_thread.run_sync(_write_tree, found, dst)

    async def open_process(self, cmd: Sequence[str], *, user: str | None = None,
                           cwd: str | None = None, env: Mapping[str, str] | None = None
                           ) -> InMemoryAgent:
        await Latency.wait(RTT_SEC)
        return InMemoryAgent(self._tg, self._updates, self._turn_sec, self._park)

    async def stop(self, delete: bool = True) -> None:
        if self._id is not None:
            await Latency.wait(RTT_SEC)
            self._id = None


def _read_tree(src: Path, dst: str) -> dict[str, bytes]:
    return {f"{dst}/{path.relative_to(src).as_posix()}": path.read_bytes()
            for path in src.rglob("*") if path.is_file()}


def _write_tree(files: dict[str, bytes], dst: Path) -> None:
    for name, data in files.items():
        target = dst / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


class LatencyProvider(SandboxProvider):
    """Makes `LatencySandbox`es; `tg` (set by the benchmark, optional) hosts the in-memory
    agents."""

    name = "latency-fake"
    capabilities = LatencySandbox.capabilities
    tg: ClassVar[anyio.abc.TaskGroup | None] = None
    updates: ClassVar[int] = UPDATES_PER_TURN
    turn_sec: ClassVar[float] = TURN_SEC
    park: ClassVar[Park | None] = None

    def create(self, spec: SandboxSpec) -> LatencySandbox:
        return LatencySandbox(spec, LatencyProvider.tg, LatencyProvider.updates,
                              LatencyProvider.turn_sec, LatencyProvider.park)

    async def cleanup(self, job_name: str | None = None) -> list[str]:
        return []


class BenchAcpDriver:
    """An ACP agent with nothing to install: `connect` opens benchflow's real `AcpSession`
    on the sandbox's live process (the in-memory agent)."""

    name = "bench-acp"

    async def install(self, ctx: AgentContext) -> None:
        return None

    @asynccontextmanager
    async def connect(self, ctx: AgentContext, role: Role, scene: str
                      ) -> AsyncIterator[AgentConnection]:
        from benchflow.acp import AcpSession

        async with AcpSession.open(
                ctx.require_sandbox("bench-acp"), argv=["bench-acp"], cwd=ctx.workdir,
                role=role.name, scene=scene, trajectory=ctx.trajectory,
                stderr_path=ctx.paths.agent_dir / f"{role.name}.stderr.txt") as session:
            yield AcpConnection(session)
