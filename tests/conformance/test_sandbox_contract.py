"""The Sandbox contract, run against every backend: docker, and daytona and modal on fakes
of their SDKs whose sandboxes are local containers (`tests/fakes/daytona_sdk.py`,
`tests/fakes/modal_sdk.py`). A backend without a capability a test needs skips that
test (`needs_live`); every backend here has them all.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from benchflow.sandbox.base import LiveProcess, Sandbox
from benchflow.sandbox.factory import create_sandbox
from benchflow.sandbox.spec import SandboxSpec, SpecTree

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

BACKENDS = {
    "docker": {},
    "daytona": {"client_factory": "tests.fakes.daytona_sdk:FakeAsyncDaytona"},
    "modal": {"sdk_module": "tests.fakes.modal_sdk"},
}


@pytest.fixture(params=list(BACKENDS))
def backend(request) -> str:
    return request.param


def make_box(backend: str, spec: SandboxSpec) -> Sandbox:
    return create_sandbox(backend, spec, BACKENDS[backend])


INITS = ("docker-init", "tini", "dumb-init", "catatonit")
"""Init processes that reap children and forward signals as PID 1."""


def needs_live(sandbox: Sandbox) -> None:
    if not sandbox.capabilities.live_processes:
        pytest.skip(f"{sandbox.backend} has no live processes")


@pytest.fixture
async def sandbox(tmp_path, job_label, backend) -> AsyncIterator[Sandbox]:
    env_dir = tmp_path / "environment"
    env_dir.mkdir()
    (env_dir / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    box = make_box(backend, SandboxSpec(name="contract", environment_dir=env_dir, memory_mb=256,
                                        labels={"benchflow.job": job_label}))
    await box.start()
    try:
        yield box
    finally:
        await box.stop()


async def read_all(stream) -> bytes:
    chunks = []
    try:
        while True:
            chunks.append(await stream.receive())
    except anyio.EndOfStream:
        return b"".join(chunks)


async def processes(sandbox) -> bytes:
    """Command lines of every process in the sandbox (minbase images have no ps)."""
    script = 'for p in /proc/[0-9]*; do tr "\\0" " " < "$p/cmdline"; echo; done 2>/dev/null'
    listing = (await sandbox.exec(["sh", "-c", script])).stdout
    assert b"sleep infinity" in listing  # the listing itself works
    return listing


async def test_exec_captures_exit_code_and_both_streams(sandbox):
    result = await sandbox.exec(["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert (result.exit_code, result.stdout, result.stderr) == (7, b"out\n", b"err\n")
    assert sandbox.workdir == "/app"
    assert (await sandbox.exec(["pwd"])).stdout == b"/app\n"


async def test_exec_user_cwd_env(sandbox):
    result = await sandbox.exec(["sh", "-c", 'id -un; pwd; echo "$GREETING"'], user="nobody",
                                cwd="/tmp", env={"GREETING": "hi there"})
    assert result.stdout == b"nobody\n/tmp\nhi there\n"


async def test_exec_output_is_binary_and_large_safe(sandbox):
    result = await sandbox.exec(["sh", "-c", "head -c 4000000 /dev/urandom | tee /tmp/blob"])
    copy = await sandbox.exec(["cat", "/tmp/blob"])
    assert len(result.stdout) == 4_000_000 and copy.stdout == result.stdout


async def test_exec_timeout_kills_the_command(sandbox):
    with anyio.fail_after(20):
        result = await sandbox.exec(["sh", "-c", "sleep 30; echo late"], timeout=0.5)
    assert result.timed_out and result.stdout == b""
    assert b"sleep 30" not in await processes(sandbox)


async def test_upload_and_download_files_and_folders(sandbox, tmp_path):
    src = tmp_path / "src"
    (src / "nested").mkdir(parents=True)
    (src / "a.txt").write_text("alpha")
    (src / "nested" / "b.bin").write_bytes(bytes(range(256)))
    await sandbox.upload(src, "/data/in")
    await sandbox.upload_bytes(b"#!/bin/sh\necho ran\n", "/data/run.sh", mode=0o755)
    assert (await sandbox.exec(["/data/run.sh"])).stdout == b"ran\n"
    assert (await sandbox.exec(["cat", "/data/in/nested/b.bin"])).stdout == bytes(range(256))
    out = tmp_path / "out"
    await sandbox.download("/data/in", out)
    assert (out / "a.txt").read_text() == "alpha"
    assert (out / "nested" / "b.bin").read_bytes() == bytes(range(256))
    await sandbox.download("/data/run.sh", tmp_path / "run.sh")
    assert (tmp_path / "run.sh").read_bytes().startswith(b"#!/bin/sh")


async def test_download_does_not_follow_links_out_of_the_destination(sandbox, tmp_path):
    await sandbox.exec(["sh", "-c", "mkdir -p /logs/x && ln -s /etc/passwd /logs/x/link "
                                    "&& ln -s ../../../../../tmp/evil /logs/x/up"])
    await sandbox.download("/logs", tmp_path / "logs")
    assert not (tmp_path.parent / "tmp" / "evil").exists()
    assert (tmp_path / "logs" / "verifier").is_dir()


async def test_open_process_round_trips_stdin_and_a_1mb_line(sandbox):
    needs_live(sandbox)
    async with await sandbox.open_process(["sh", "-c", "cat; echo bye >&2; exit 3"]) as proc:
        assert isinstance(proc, LiveProcess)
        line = b"y" * 1_000_000 + b"\n"
        await proc.stdin.send(b"hello\n")
        await proc.stdin.send(line)
        await proc.stdin.send_eof()
        out = await read_all(proc.stdout)
        err = await read_all(proc.stderr)
        assert await proc.wait() == 3
    assert out == b"hello\n" + line and err == b"bye\n"


async def test_kill_reaches_the_whole_process_group(sandbox):
    needs_live(sandbox)
    async with await sandbox.open_process(["sh", "-c", "sleep 301 & sleep 302 & wait"]) as proc:
        listing = b""
        while b"sleep 301" not in listing or b"sleep 302" not in listing:
            await anyio.sleep(0.05)  # until both children run (pytest's timeout bounds it)
            listing = await processes(sandbox)
        await proc.kill()
        with anyio.fail_after(120):  # a hang guard: kill must end the process at all
            code = await proc.wait()
    assert code != 0
    listing = await processes(sandbox)
    assert b"sleep 301" not in listing and b"sleep 302" not in listing


async def test_stop_is_fast_and_idempotent(tmp_path, job_label, backend):
    env_dir = tmp_path / "e"
    env_dir.mkdir()
    (env_dir / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    box = make_box(backend, SandboxSpec(name="contract", environment_dir=env_dir,
                                        labels={"benchflow.job": job_label}))
    await box.start()
    assert box.sandbox_id is not None
    # an init process as PID 1 forwards the stop signal, so a stop never waits out the
    # SIGTERM grace (how fast it is: labs/benchmarks/provider_overhead.py)
    pid1 = (await box.exec(["cat", "/proc/1/comm"])).stdout.decode().strip()
    assert pid1 in INITS, pid1
    await box.stop()
    await box.stop()
    assert box.sandbox_id is None


async def test_spec_files_are_placed_by_start(tmp_path, job_label, backend):
    env_dir = tmp_path / "e"
    env_dir.mkdir()
    (env_dir / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    box = make_box(backend, SandboxSpec(name="contract", environment_dir=env_dir,
                                        files={"/tmp/instruction.md": b"do the thing\n",
                                               "/opt/nested/dir/f.txt": b"x"},
                                        labels={"benchflow.job": job_label}))
    await box.start()
    try:
        assert (await box.exec(["cat", "/tmp/instruction.md"])).stdout == b"do the thing\n"
        listing = await box.exec(["stat", "-c", "%a", "/opt/nested/dir/f.txt"])
        assert listing.stdout.strip() == b"644"
    finally:
        await box.stop()


async def test_spec_trees_are_placed_by_start_with_modes_owner_and_links(tmp_path, job_label,
                                                                          backend):
    env_dir, tree = tmp_path / "e", tmp_path / "tree"
    env_dir.mkdir()
    (env_dir / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (tree / "sub").mkdir(parents=True)
    (tree / "run.sh").write_text("echo hi\n")
    (tree / "run.sh").chmod(0o755)
    (tree / "sub" / "f.txt").write_text("f\n")
    (tree / "sub" / "f.txt").chmod(0o644)
    (tree / "to-f").symlink_to("sub/f.txt")
    box = make_box(backend, SandboxSpec(
        name="contract", environment_dir=env_dir, labels={"benchflow.job": job_label},
        trees=(SpecTree(src=tree, dst="/opt/private", root_only=True, link="/opt/alias"),
               SpecTree(src=tree, dst="/opt/shared"))))
    await box.start()
    try:
        stat = await box.exec(["stat", "-c", "%n %u %a %F", "/opt/private", "/opt/private/run.sh",
                               "/opt/private/sub/f.txt", "/opt/shared/run.sh",
                               "/opt/shared/sub/f.txt"])
        assert stat.stdout.decode().splitlines() == [
            "/opt/private 0 700 directory", "/opt/private/run.sh 0 700 regular file",
            "/opt/private/sub/f.txt 0 600 regular file",
            f"/opt/shared/run.sh {os.getuid()} 755 regular file",
            f"/opt/shared/sub/f.txt {os.getuid()} 644 regular file"]
        links = await box.exec(["readlink", "/opt/alias", "/opt/private/to-f", "/opt/shared/to-f"])
        assert links.stdout.decode().split() == ["/opt/private", "sub/f.txt", "sub/f.txt"]
        assert (await box.exec(["cat", "/opt/alias/to-f"])).stdout == b"f\n"
    finally:
        await box.stop()


async def test_extra_ca_certificates_are_installed_at_build_and_start(tmp_path, job_label,
                                                                       backend):
    pem = TEST_CA
    env_dir = tmp_path / "e"
    env_dir.mkdir()
    # the RUN step sees the certificate during the build
    (env_dir / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nRUN grep -c BEGIN /etc/ssl/certs/ca-certificates.crt > /build-count\n")
    box = make_box(backend, SandboxSpec(name="contract-ca", environment_dir=env_dir,
                                        extra_ca_certs=(pem,), labels={"benchflow.job": job_label}))
    await box.start()
    try:
        assert (await box.exec(["cat", "/build-count"])).stdout.strip() == b"1"
        bundle = (await box.exec(["cat", "/etc/ssl/certs/ca-certificates.crt"])).stdout
        assert pem.read_bytes().strip() in bundle
        env = (await box.exec(["env"])).stdout
        assert b"NODE_EXTRA_CA_CERTS=" in env and b"SSL_CERT_FILE=" in env
    finally:
        await box.stop()


TEST_CA = Path(__file__).parents[1] / "fixtures" / "certs" / "test-ca.pem"
"""A self-signed CA (no key kept) valid for a century: one fixed file, so the image built
with it is cached once instead of a new one per run."""
