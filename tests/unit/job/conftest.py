"""Job unit-test fixtures: task folders on disk and an in-memory sandbox.

`FakeSandbox` implements the Sandbox protocol without processes: files live in a
dict, `exec` answers from a `Behaviour` (per-script exit codes, a delay, the
verifier's reward), `start` can fail a given number of times. `fake_sandboxes`
routes every rollout's `create_sandbox` to it, so whole jobs run in milliseconds.

Agent commands take `delay_sec` on the jump clock (`tests/fakes/clock.py`): the clock
moves by the delay at once, so timeouts fire exactly when the fake time says, on any
machine. `delay_sec = math.inf` is a command that hangs until its timeout or until the
test cancels it; `Behaviour.running` counts those in flight, for tests to wait on.
"""

from __future__ import annotations

import base64
import io
import math
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from benchflow.errors import SandboxStartError
from benchflow.sandbox import registry
from benchflow.sandbox.base import ExecResult, SandboxCapabilities
from benchflow.sandbox.provider import SandboxProvider
from benchflow.sandbox.spec import SandboxSpec
from benchflow.verify._scripts import _BEFORE_DONE
from tests.fakes.clock import elapse

TASK_MD = """---
task:
  name: {name}
agent:
  timeout_sec: 30
verifier:
  timeout_sec: 20
---
Write hello for {name}.
"""


def write_task(root: Path, name: str, *, solve: str = "echo hi\n") -> Path:
    """A native task folder `root/name` with a Dockerfile, test.sh and solve.sh."""
    folder = root / name
    (folder / "environment").mkdir(parents=True, exist_ok=True)
    (folder / "verifier").mkdir(exist_ok=True)
    (folder / "oracle").mkdir(exist_ok=True)
    (folder / "task.md").write_text(TASK_MD.format(name=name))
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    (folder / "verifier" / "test.sh").write_text(
        "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n")
    (folder / "oracle" / "solve.sh").write_text(f"#!/bin/bash\n{solve}")
    return folder


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """`tmp/bench/` with tasks alpha, bravo, charlie."""
    root = tmp_path / "bench"
    for name in ("alpha", "bravo", "charlie"):
        write_task(root, name)
    return root


@dataclass
class Behaviour:
    """What fake sandboxes do; shared by every sandbox of a test."""

    start_failures: int = 0
    """How many `start()` calls fail (with SandboxStartError) before they succeed."""
    start_failure_transient: bool = True
    """Whether those failures are transient (a daemon 5xx) or would repeat (a 4xx)."""
    exit_codes: dict[str, int] = field(default_factory=dict)
    """Exit code by script name suffix (`install.sh`, `execute.sh`, `solve.sh`)."""
    delay_sec: float = 0.0
    """How long agent commands take (fake time); `math.inf`: they hang."""
    hang_after: int | None = None
    """Agent commands after this many hang (as with `delay_sec = math.inf`)."""
    reward: str = "1"
    starts: int = 0
    stops: int = 0
    execs: list[tuple[list[str], str | None, dict[str, str]]] = field(default_factory=list)
    agent_commands: int = 0
    """Agent commands (install, execute, solve) started so far."""
    running: int = 0
    """Agent commands in flight now."""
    sandboxes: list[FakeSandbox] = field(default_factory=list)

    @property
    def live(self) -> int:
        return self.starts - self.stops


class FakeSandbox:
    """An in-memory Sandbox (see the module docstring)."""

    capabilities = SandboxCapabilities(live_processes=False)
    backend = "fake"
    image: str | None = None

    def __init__(self, behaviour: Behaviour, spec: SandboxSpec | None = None) -> None:
        self.behaviour = behaviour
        self.spec = spec
        self.workdir = "/app"
        self.files: dict[str, bytes] = {}
        self.started = False
        behaviour.sandboxes.append(self)

    @property
    def sandbox_id(self) -> str | None:
        return f"fake-{id(self):x}" if self.started else None

    async def start(self) -> None:
        await anyio.lowlevel.checkpoint()
        if self.behaviour.start_failures > 0:
            self.behaviour.start_failures -= 1
            transient = self.behaviour.start_failure_transient
            raise SandboxStartError(f"docker API error: {500 if transient else 400} Server "
                                    "Error: boom", transient=transient)
        self.started = True
        self.behaviour.starts += 1
        if self.spec is not None:  # placed by start, as every backend does
            self.files.update(self.spec.files)

    async def exec(self, cmd: Sequence[str], *, user: str | None = None, cwd: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float | None = None,
                   stdin: bytes | None = None) -> ExecResult:
        argv = [str(c) for c in cmd]
        self.behaviour.execs.append((argv, user, dict(env or {})))
        joined = " ".join(argv)
        # a chained exec (verify/_scripts.py): its steps before the main command succeed
        done = (_BEFORE_DONE + "\n").encode() if _BEFORE_DONE in joined else b""
        self.files.update(unpacked(argv))
        if "test.sh" in joined:
            self.files["/logs/verifier/reward.txt"] = self.behaviour.reward.encode()
            return ExecResult(0, done + b"verified\n", b"")
        for suffix, code in self.behaviour.exit_codes.items():
            if suffix in joined:
                if await self._run(timeout):
                    return ExecResult(124, b"", b"killed", timed_out=True)
                return ExecResult(code, f"ran {suffix}\n".encode(), b"some stderr\n")
        if any(s in joined for s in ("execute.sh", "solve.sh")) and await self._run(timeout):
            return ExecResult(124, b"", b"killed", timed_out=True)
        return ExecResult(0, b"ok\n", b"")

    async def _run(self, timeout: float | None) -> bool:
        """Take the agent command's time (see the module docstring); True if it timed out."""
        b = self.behaviour
        delay = b.delay_sec
        if b.hang_after is not None and b.agent_commands >= b.hang_after:
            delay = math.inf
        b.agent_commands += 1
        b.running += 1
        try:
            if timeout is None or delay < timeout:
                await (anyio.sleep_forever() if math.isinf(delay) else elapse(delay))
                return False
            await (anyio.sleep(timeout) if math.isinf(delay) else elapse(timeout))
            return True
        finally:
            b.running -= 1

    async def upload(self, src: Path, dst: str) -> None:
        for path in Path(src).rglob("*"):
            if path.is_file():
                self.files[f"{dst}/{path.relative_to(src).as_posix()}"] = path.read_bytes()

    async def upload_bytes(self, data: bytes, dst: str, mode: int = 0o644) -> None:
        self.files[dst] = data

    async def download(self, src: str, dst: Path) -> None:
        prefix = src.rstrip("/") + "/"
        for name, data in self.files.items():
            if name.startswith(prefix):
                target = dst / name[len(prefix):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)

    async def open_process(self, cmd: Sequence[str], **kwargs: object) -> object:
        raise NotImplementedError("FakeSandbox has no live processes")

    async def stop(self, delete: bool = True) -> None:
        if self.started:
            self.started = False
            self.behaviour.stops += 1


def unpacked(argv: Sequence[str]) -> dict[str, bytes]:
    """The files an `unpack.sh` step of an exec puts in place (`unpack MOUNT ARCHIVE`, a
    base64 tar from /: verify/runner.py), by sandbox path."""
    if "unpack" not in argv:
        return {}
    archive = argv[argv.index("unpack") + 2]
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(archive))) as tar:
        return {f"/{m.name}": tar.extractfile(m).read()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


class FakeProvider(SandboxProvider):
    """The provider of FakeSandboxes, registered as `fake` by the `behaviour` fixture."""

    name = "fake"
    capabilities = FakeSandbox.capabilities
    behaviour: Behaviour | None = None
    cleaned: list[str | None] = []

    def create(self, spec: SandboxSpec) -> FakeSandbox:
        assert self.behaviour is not None
        return FakeSandbox(self.behaviour, spec)

    async def cleanup(self, job_name: str | None = None) -> list[str]:
        FakeProvider.cleaned.append(job_name)
        return []


@pytest.fixture
def behaviour(monkeypatch: pytest.MonkeyPatch) -> Behaviour:
    """Route every rollout's sandbox to a FakeSandbox driven by the returned Behaviour
    (through the provider registered as `fake`, also for the other environment names)."""
    shared = Behaviour()
    monkeypatch.setattr(FakeProvider, "behaviour", shared)
    monkeypatch.setattr(FakeProvider, "cleaned", [])
    monkeypatch.setitem(registry.BUILTIN, "fake", (f"{FakeProvider.__module__}:FakeProvider", None))
    for where in ("benchflow.rollout.rollout", "benchflow.sandbox.early"):  # early starts too
        monkeypatch.setattr(f"{where}.create_sandbox",
                            lambda environment, spec, provider_config=None: FakeSandbox(shared, spec))
    return shared


@pytest.fixture(autouse=True)
def _no_hardening(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-memory sandbox cannot run the hardening scripts (integration tests cover them)."""
    monkeypatch.setattr("benchflow.rollout.rollout.Rollout.hardened", property(lambda self: False))
