"""The start's requests without the Docker SDK (`benchflow.sandbox.docker.engine`): the create
body is the SDK's own, byte for byte as JSON, for the options a sandbox's start makes; only the
plain local setup goes that way."""

from __future__ import annotations

import json
import re
import socket
import threading
from pathlib import Path

import docker
import pytest

from benchflow.errors import SandboxStartError
from benchflow.sandbox.docker import engine
from benchflow.sandbox.docker.errors import map_docker_errors
from benchflow.sandbox.docker.sandbox import create_kwargs
from benchflow.sandbox.spec import SandboxSpec

SPECS = [
    SandboxSpec(name="plain"),
    SandboxSpec(name="t", env={"A": "1", "B": "x=y"}, labels={"benchflow.job": "j",
                "benchflow.rollout": "j/r"}, workdir="/app", cpus=0.5, memory_mb=512,
                pids_limit=64, runtime="runc"),
    SandboxSpec(name="no limits", cpus=0, memory_mb=0, pids_limit=None, storage_mb=None),
    SandboxSpec(name="offline", network_policy="none", network="ignored"),
    SandboxSpec(name="model-only", network_policy="model-only", network="benchflow-mo-1"),
    SandboxSpec(name="on a network", network="my-net"),
]


class _Sent(Exception):
    pass


def sdk_body(kwargs: dict, version: str) -> tuple[dict, dict]:
    """What the SDK's `containers.create(**kwargs)` posts (its ContainerConfig and
    create_host_config, through its `_post_json`), captured before it is sent."""
    client = docker.DockerClient(base_url="unix:///nonexistent.sock", version=version)
    sent: dict = {}

    def post(url, data=None, params=None, **_):
        sent.update(url=url, params=params, data=json.loads(data))
        raise _Sent

    client.api._post = post  # the request itself is not made
    with pytest.raises(_Sent):
        client.containers.create(**kwargs)
    assert sent["url"].endswith("/containers/create")
    return sent["params"], sent["data"]


@pytest.mark.parametrize("version", ["1.41", "1.47"])
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_the_create_body_is_the_sdks(spec, version, monkeypatch):
    monkeypatch.setattr(engine, "local_socket", lambda: "/unused.sock")
    kwargs = create_kwargs(spec, "task-image:abc", spec.env)
    params, expected = sdk_body(dict(kwargs), version)
    body = engine.create_body({k: v for k, v in kwargs.items() if k != "name"})
    assert body == expected
    assert params == {"name": kwargs["name"]}


def test_the_body_check_can_fail():
    kwargs = create_kwargs(SPECS[1], "task-image:abc", SPECS[1].env)
    _, expected = sdk_body(dict(kwargs), "1.41")
    body = engine.create_body({k: v for k, v in kwargs.items() if k not in ("name", "init")})
    assert body != expected


@pytest.mark.parametrize("extra", [{"volumes": {"v": {"bind": "/v", "mode": "ro"}}},
                                   {"volumes": ["v:/v:ro"]}, {"device_requests": [{}]},
                                   {"privileged": True}, {"command": "sleep infinity"},
                                   {"mem_limit": "1g"}])
def test_options_it_does_not_translate_are_left_to_the_sdk(extra):
    kwargs = create_kwargs(SPECS[0], "img", {})
    kwargs.pop("name")
    assert engine.create_body(kwargs) is not None
    assert engine.create_body({**kwargs, **extra}) is None


@pytest.fixture
def plain_env(monkeypatch, tmp_path):
    for name in ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONTEXT",
                 "DOCKER_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("env, expected", [
    ({}, engine.DEFAULT_SOCKET),
    ({"DOCKER_HOST": "unix:///run/user/1000/docker.sock"}, "/run/user/1000/docker.sock"),
    ({"DOCKER_CONTEXT": "default"}, engine.DEFAULT_SOCKET),
    ({"DOCKER_HOST": "tcp://10.0.0.2:2375"}, None),
    ({"DOCKER_HOST": "ssh://me@host"}, None),
    ({"DOCKER_HOST": "unix://"}, None),
    ({"DOCKER_TLS_VERIFY": "1"}, None),
    ({"DOCKER_TLS_VERIFY": ""}, None),
    ({"DOCKER_CERT_PATH": "/certs"}, None),
    ({"DOCKER_CONTEXT": "remote"}, None),
])
def test_only_the_plain_local_socket_goes_without_the_sdk(plain_env, monkeypatch, env,
                                                          expected):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert engine.local_socket() == expected


@pytest.mark.parametrize("config, plain", [
    ({"auths": {"registry": {}}}, True),
    ({"currentContext": "default"}, True),
    ({"currentContext": "desktop-linux"}, False),
    ({"proxies": {"default": {"httpProxy": "http://proxy:3128"}}}, False),
    ("not json", False),
])
def test_a_cli_config_with_a_context_or_proxies_is_left_to_the_sdk(plain_env, monkeypatch,
                                                                   config, plain):
    folder = plain_env / "docker-config"
    folder.mkdir()
    (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    monkeypatch.setenv("DOCKER_CONFIG", str(folder))
    assert (engine.local_socket() is not None) is plain
    monkeypatch.delenv("DOCKER_CONFIG")
    (plain_env / ".docker").mkdir()
    (folder / "config.json").rename(plain_env / ".docker" / "config.json")
    assert (engine.local_socket() is not None) is plain


def serve_once(path: Path, answer: bytes) -> threading.Thread:
    """A unix socket at `path` answering one request with `answer` (raw HTTP)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def run() -> None:
        conn, _ = server.accept()
        with conn, server:
            request = b""
            while b"\r\n\r\n" not in request:  # the whole request first: headers, body
                request += conn.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            while length and len(body) < int(length.group(1)):
                body += conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_refusal_and_a_lost_daemon_are_typed(plain_env, monkeypatch):
    sock = plain_env / "d.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    kwargs = {k: v for k, v in create_kwargs(SPECS[0], "img", {}).items() if k != "name"}
    body = b'{"message": "Conflict. The container name \\"/bf\\" is already in use"}'
    serve_once(sock, b"HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    with pytest.raises(SandboxStartError) as mapped, map_docker_errors(SandboxStartError):
        with pytest.raises(engine.Refused) as refused:
            engine.create("bf", kwargs)
        assert refused.value.status == 409 and "already in use" in refused.value.message
        raise refused.value
    # as the SDK's APIError reads: its explanation; a 4xx fails again, no retry
    assert str(mapped.value).startswith("docker API error: Conflict. The container name")
    assert not mapped.value.transient
    sock.unlink()
    with pytest.raises(SandboxStartError) as lost, map_docker_errors(SandboxStartError):
        engine.create("bf", kwargs)  # nobody listens: Unanswered
    assert isinstance(lost.value.__cause__, engine.Unanswered)
    assert str(lost.value).startswith("lost connection to the docker daemon")
    assert lost.value.transient
    assert engine.ping() is False and engine.image_exists("img") is None  # the SDK asks


@pytest.mark.parametrize("answer", [b"HTTP/1.1 204 No Content\r\n\r\n",
                                    b"HTTP/1.1 304 Not Modified\r\n\r\n"])
def test_a_start_or_one_already_done_is_a_start(plain_env, monkeypatch, answer):
    sock = plain_env / "d.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    thread = serve_once(sock, answer)
    assert engine.start("abc") is True
    thread.join()
