"""A collection pass, in Harbor's order, on a recording multi-container sandbox: main's hooks
and artifacts, then main stopped, then the services' hooks and artifacts; best effort for
hooks; what `result.json` is told."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchflow.errors import SandboxExecError
from benchflow.sandbox.base import ExecResult, ServiceSandbox
from benchflow.task.collection import CollectionPass
from benchflow.task.models import Artifact, CollectHook
from benchflow.verify.collect import collect_main, collect_services, missing_lines
from benchflow.verify.separate import _clear_artifact_paths

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recorder:
    """Main's files and each service's, and every call in order."""

    workdir = "/app"

    def __init__(self, files: dict[str, dict[str, str]], shared: dict[str, str] | None = None,
                 results: dict[str, ExecResult] | None = None) -> None:
        self.files, self.shared, self.results = files, shared or {}, results or {}
        self.calls: list[tuple] = []

    async def exec(self, cmd, *, user=None, cwd=None, env=None, timeout=None):
        if cmd[0] == "test":
            return ExecResult(0 if cmd[2] in self.files["main"] else 1, b"", b"")
        self.calls.append(("exec", cmd[-1], user, cwd, dict(env or {})))
        return self.results.get(cmd[-1], ExecResult(0, b"", b""))

    async def download(self, src: str, dst: Path) -> None:
        self.calls.append(("download", "main", src))
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(self.files["main"][src])

    async def service_exec(self, service, command, *, user=None, timeout):
        self.calls.append(("service_exec", service, command, user))
        if command == "boom":
            raise SandboxExecError("no such service")
        return self.results.get(command, ExecResult(0, b"", b""))

    async def service_download(self, service, src, dst):
        self.calls.append(("download", service, src))
        if src not in self.files.get(service, {}):
            return False
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(self.files[service][src])
        return True

    async def stop_main(self):
        self.calls.append(("stop_main",))

    def main_can_write(self, service, path):
        return self.shared.get(path)

    # unused by a collection pass, present for the protocol
    capabilities = backend = spec = image = None
    sandbox_id = None

    async def start(self): ...
    async def upload(self, src, dst): ...
    async def upload_bytes(self, data, dst, mode=0o644): ...
    async def open_process(self, cmd, **kw): ...
    async def stop(self, delete=True): ...


PASS = CollectionPass(
    hooks=(CollectHook(command="snapshot", service="api"), CollectHook(command="sync"),
           CollectHook(command="flush", service="api", user="nobody")),
    artifacts=(Artifact(source="/var/log/api/orders.log", service="api"),
               Artifact(source="/app/out.txt"), Artifact(source="/tmp/stats.json", service="api")))


async def collect(sandbox: Recorder, dest: Path, *, stop_main: bool = True):
    got = await collect_main(sandbox, PASS, dest, main_env={"PATH": "/usr/bin:/bin"})
    got.extend(await collect_services(sandbox, PASS, dest, stop_main=stop_main))
    return got


async def test_main_first_then_main_stopped_then_the_services(tmp_path):
    box = Recorder({"main": {"/app/out.txt": "agent"},
                    "api": {"/var/log/api/orders.log": "a\n", "/tmp/stats.json": "{}"}})
    assert isinstance(box, ServiceSandbox)
    got = await collect(box, tmp_path)
    assert [c[:3] for c in box.calls] == [
        ("exec", "sync", None), ("download", "main", "/app/out.txt"), ("stop_main",),
        ("service_exec", "api", "snapshot"), ("service_exec", "api", "flush"),
        ("download", "api", "/var/log/api/orders.log"), ("download", "api", "/tmp/stats.json")]
    assert box.calls[0][3:] == ("/app", {"PATH": "/usr/bin:/bin"})  # main: the fixed env
    assert box.calls[4][3] == "nobody"
    assert (tmp_path / "var/log/api/orders.log").read_text() == "a\n"
    assert (tmp_path / "tmp/stats.json").read_text() == "{}"
    assert (got.missing, got.dropped, got.warnings) == ([], [], [])


async def test_main_keeps_running_when_it_is_still_needed(tmp_path):
    box = Recorder({"main": {"/app/out.txt": "x"}, "api": {}})
    await collect(box, tmp_path, stop_main=False)
    assert ("stop_main",) not in box.calls


async def test_hooks_are_best_effort_and_missing_files_are_named(tmp_path):
    box = Recorder({"main": {}, "api": {"/tmp/stats.json": "{}"}},
                   results={"sync": ExecResult(3, b"", b"out of disk"),
                            "snapshot": ExecResult(124, b"", b"", timed_out=True)})
    hooks = (*PASS.hooks, CollectHook(command="boom", service="api"))
    one = CollectionPass(hooks, PASS.artifacts)
    got = await collect_main(box, one, tmp_path)
    got.extend(await collect_services(box, one, tmp_path, stop_main=True))
    assert got.warnings == [
        "collect hook in service 'main' ('sync') exited with code 3; the verifier ran with "
        "what it left",
        "collect hook in service 'api' ('snapshot') timed out after 60 s; the verifier ran "
        "with what it left",
        "collect hook in service 'api' ('boom') could not run: no such service; the verifier "
        "ran with what it left"]
    assert missing_lines(got.missing, "the separate verifier") == [
        "artifact /app/out.txt did not exist in the agent's sandbox; the separate verifier "
        "ran without it",
        "artifact /var/log/api/orders.log did not exist in service 'api'; the separate "
        "verifier ran without it"]


async def test_a_service_file_main_can_write_is_flagged(tmp_path):
    box = Recorder({"main": {"/app/out.txt": "x"}, "api": {"/tmp/stats.json": "{}"}},
                   shared={"/tmp/stats.json": "volume 'tmp' (at /tmp in 'api') is writable "
                                              "in main at /shared"})
    got = await collect(box, tmp_path)
    assert got.warnings == [
        "artifact /tmp/stats.json from service 'api': volume 'tmp' (at /tmp in 'api') is "
        "writable in main at /shared, so the agent could have written it; the verifier "
        "should not trust it more than main's files"]


async def test_nothing_to_take_from_services_leaves_main_running(tmp_path):
    box = Recorder({"main": {"/app/out.txt": "x"}})
    one = CollectionPass((), (Artifact(source="/app/out.txt"),))
    await collect_main(box, one, tmp_path)
    await collect_services(box, one, tmp_path, stop_main=True)
    assert box.calls == [("download", "main", "/app/out.txt")]


def test_the_carried_over_logs_never_stand_in_for_an_artifact(tmp_path):
    logs = tmp_path / "logs"
    (logs / "api").mkdir(parents=True)
    (logs / "api" / "orders.log").write_text("faked by the agent")
    (logs / "agent").mkdir()
    (logs / "agent" / "out.txt").write_text("kept")
    (logs / "ledger").mkdir()
    (logs / "ledger" / "planted").write_text("x")
    _clear_artifact_paths(logs, [Artifact(source="/logs/api/orders.log", service="api"),
                                 Artifact(source="/logs/ledger", service="ledger"),
                                 Artifact(source="/app/x")])
    assert sorted(p.relative_to(logs).as_posix() for p in logs.rglob("*")) == [
        "agent", "agent/out.txt", "api"]

