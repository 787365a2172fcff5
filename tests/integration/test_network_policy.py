"""Network policies, proven from inside the sandbox against servers of this test only.

Two servers run on this machine: the scripted model server, and a second HTTP server
standing for "any other service", bound to every host address (0.0.0.0). A probe in the
sandbox (bash's /dev/tcp, then a GET) tries each at the addresses where a sandbox could
find the host: the model-only network's gateway and docker0's gateway. No traffic goes
to any address outside this machine.

| policy | model server | the second server |
|---|---|---|
| public (control: the probe works) | reached | reached |
| none | not reached | not reached |
| model-only | reached (GET /health answers 200) | not reached, at any host address |

Each policy is checked both ways a rollout applies it: at container creation, and on a
running container that started public (agents whose install needs the network).
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import docker
import pytest

from benchflow.model_server import ModelServer, parse_script
from benchflow.sandbox import host_firewall
from benchflow.sandbox import network as netmod
from benchflow.sandbox.docker import LABEL_JOB, DockerSandbox
from benchflow.sandbox.network import (
    ModelOnlyNetwork,
    acquire_model_only_network,
    allow_endpoint,
    cleanup_networks,
    isolate,
    model_only_names,
    network_gateway,
    release_model_only_network,
    revoke_endpoint,
)
from benchflow.sandbox.spec import NetworkPolicy, SandboxSpec

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

IMAGE = "debian:bookworm-slim"
SCRIPT = parse_script({"name": "probe", "steps": [{"text": "hi"}]})
# Prints "<target> open <HTTP status line>", "<target> closed" or "<target> no answer (...)"
# for each host:port. "closed" is the connect's own answer, a refusal (a REJECT, a port
# nobody listens on) or no route (no network): never a probe that gave up waiting, which
# a loaded machine can make of a slow connect or a slow server. A connect or an answer not
# there after a minute is "no answer"; a connection made is "open" whatever follows.
PROBE_WAIT_SEC = 60
PROBE = r"""
for target in "$@"; do
    host=${target%:*} port=${target#*:}
    out=$(timeout WAIT bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 3
        echo connected
        printf "GET /health HTTP/1.0\r\nHost: x\r\n\r\n" >&3
        head -n 1 <&3' "$host" "$port" 2>/tmp/.probe.err)
    code=$? err=$(tail -n 1 /tmp/.probe.err)
    case $code:$err in
        *"Connection refused"|*"Network is unreachable"|*"No route to host") refused=yes;;
        *) refused=no;;
    esac
    if [ "${out%%$'\n'*}" = connected ]; then
        line=$(printf '%s\n' "$out" | sed -n 2p)
        echo "$target open ${line%$'\r'}"
    elif [ "$code" = 3 ] && [ "$refused" = yes ]; then
        echo "$target closed"
    else
        echo "$target no answer (exit $code: $err)"
    fi
done
""".replace("WAIT", str(PROBE_WAIT_SEC))


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class _Other(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def other_server() -> Iterator[int]:
    """A second service on this machine, on every host address; yields its port."""
    server = ThreadingHTTPServer(("0.0.0.0", 0), _Other)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture
async def model_only(job_label: str) -> AsyncIterator[ModelOnlyNetwork]:
    reason = host_firewall.available()
    if reason is not None:
        pytest.skip(f"model-only needs the host firewall: {reason}")
    key = f"{job_label}-{uuid.uuid4().hex[:6]}"
    network = await acquire_model_only_network(key)
    try:
        yield network
    finally:
        await release_model_only_network(network)
    client = docker.from_env()
    assert not client.networks.list(names=[network.name]), "the network outlived its release"
    assert not host_firewall.installed(network.chain, network.bridge)


def _sandbox(job: str, policy: NetworkPolicy = "public", network: str | None = None
             ) -> DockerSandbox:
    return DockerSandbox(SandboxSpec(name=f"net-{policy}", docker_image=IMAGE, workdir="/app",
                                     labels={LABEL_JOB: job}, network_policy=policy,
                                     network=network, storage_mb=None))


async def _probe(sandbox: DockerSandbox, *targets: str) -> dict[str, str]:
    result = await sandbox.exec(["bash", "-c", PROBE, "probe", *targets], user="root",
                                timeout=PROBE_WAIT_SEC * (len(targets) + 1))
    assert result.exit_code == 0, result.text()
    lines = result.stdout.decode().splitlines()
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in lines}


@pytest.fixture
async def bridge_gateway() -> str:
    return await network_gateway(None)


async def test_public_reaches_both_servers(job_label, other_server, bridge_gateway):
    with ModelServer(SCRIPT, host=bridge_gateway) as model:
        sandbox = _sandbox(job_label)
        await sandbox.start()
        try:
            seen = await _probe(sandbox, f"{bridge_gateway}:{model.port}",
                                f"{bridge_gateway}:{other_server}")
        finally:
            await sandbox.stop()
    assert seen[f"{bridge_gateway}:{model.port}"].startswith("open HTTP/1.")
    assert seen[f"{bridge_gateway}:{other_server}"] == "open HTTP/1.0 200 OK"


SLOW_ANSWER_SEC = 5.0
"""How long the slow server takes to answer: longer than the 3 s the probe used to wait
in all (a loaded machine's slow connect or slow server read as "closed")."""


class _Slow(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(SLOW_ANSWER_SEC)  # the slowness under test, not a synchronisation
        _Other.do_GET(self)  # type: ignore[arg-type]

    def log_message(self, *args: object) -> None:
        pass


async def test_the_probe_tells_a_slow_answer_from_a_refused_connect(job_label, bridge_gateway):
    slow = ThreadingHTTPServer(("0.0.0.0", 0), _Slow)
    threading.Thread(target=slow.serve_forever, daemon=True).start()
    refusing = socket.socket()  # bound, not listening: the kernel refuses its connects
    refusing.bind(("0.0.0.0", 0))
    targets = [f"{bridge_gateway}:{slow.server_address[1]}",
               f"{bridge_gateway}:{refusing.getsockname()[1]}"]
    sandbox = _sandbox(job_label)
    await sandbox.start()
    try:
        seen = await _probe(sandbox, *targets)
    finally:
        await sandbox.stop()
        slow.shutdown()
        slow.server_close()
        refusing.close()
    assert seen == {targets[0]: "open HTTP/1.0 200 OK", targets[1]: "closed"}


@pytest.mark.parametrize("how", ["at_create", "isolated_later"])
async def test_none_reaches_nothing(job_label, other_server, bridge_gateway, how):
    with ModelServer(SCRIPT, host=bridge_gateway) as model:
        targets = [f"{bridge_gateway}:{model.port}", f"{bridge_gateway}:{other_server}",
                   f"127.0.0.1:{other_server}"]
        sandbox = _sandbox(job_label, "none" if how == "at_create" else "public")
        await sandbox.start()
        try:
            if how == "isolated_later":
                before = await _probe(sandbox, *targets[:2])
                assert all(v.startswith("open") for v in before.values()), before
                await isolate(sandbox, "none")
            seen = await _probe(sandbox, *targets)
            interfaces = await sandbox.exec(["cat", "/proc/net/dev"], user="root")
        finally:
            await sandbox.stop()
    assert seen == dict.fromkeys(targets, "closed")
    names = [ln.split(":")[0].strip() for ln in interfaces.stdout.decode().splitlines()[2:]]
    assert names == ["lo"]


@pytest.mark.parametrize("how", ["at_create", "isolated_later"])
async def test_model_only_reaches_only_the_model_server(job_label, other_server, bridge_gateway,
                                                       model_only, how):
    gateway = model_only.gateway
    with ModelServer(SCRIPT, host=gateway) as model:
        await allow_endpoint(model_only, model.port)
        try:
            if how == "at_create":
                sandbox = _sandbox(job_label, "model-only", model_only.name)
            else:
                sandbox = _sandbox(job_label)
            await sandbox.start()
            try:
                if how == "isolated_later":
                    await isolate(sandbox, "model-only", model_only)
                seen = await _probe(sandbox, f"{gateway}:{model.port}",
                                    f"{gateway}:{other_server}",
                                    f"{bridge_gateway}:{other_server}")
            finally:
                await sandbox.stop()
        finally:
            await revoke_endpoint(model_only, model.port)
    assert seen == {
        f"{gateway}:{model.port}": "open HTTP/1.1 200 OK",
        f"{gateway}:{other_server}": "closed",
        f"{bridge_gateway}:{other_server}": "closed",
    }
    assert [r["answer"] for r in model.requests] == ["health"]


async def test_a_revoked_model_port_is_refused(job_label, model_only):
    with ModelServer(SCRIPT, host=model_only.gateway) as model:
        sandbox = _sandbox(job_label, "model-only", model_only.name)
        await sandbox.start()
        try:
            await allow_endpoint(model_only, model.port)
            allowed = await _probe(sandbox, f"{model_only.gateway}:{model.port}")
            await revoke_endpoint(model_only, model.port)
            revoked = await _probe(sandbox, f"{model_only.gateway}:{model.port}")
        finally:
            await sandbox.stop()
    assert [v.split(" ", 1)[0] for v in allowed.values()] == ["open"]
    assert list(revoked.values()) == ["closed"]


async def test_cleanup_removes_a_leftover_network_and_its_firewall(job_label):
    if host_firewall.available() is not None:
        pytest.skip("needs the host firewall")
    key = f"{job_label}-leftover"
    network = await acquire_model_only_network(key)
    netmod._refs.pop(network.name)  # as if the process that made it had crashed
    removed = await cleanup_networks(key)
    assert removed == [network.name]
    assert model_only_names(key)[0] == network.name
    assert not docker.from_env().networks.list(names=[network.name])
    assert not host_firewall.installed(network.chain, network.bridge)

