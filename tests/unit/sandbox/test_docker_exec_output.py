"""An exec's output is read whole even when its frames arrived in the same packet as the
daemon's `101 UPGRADED` headers: http.client has then buffered them past the headers, and
a reader of the raw socket under it (as the Docker SDK's `_read_from_socket`) lost them."""

from __future__ import annotations

import http.client
import socket
import struct
from types import SimpleNamespace

import anyio
import docker
import pytest

from benchflow.sandbox.docker import calls, engine
from benchflow.sandbox.output import OutputCapture


def _frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


@pytest.mark.parametrize("path", ["socket", "sdk"])
def test_frames_sent_with_the_upgrade_headers_are_not_lost(monkeypatch, path):
    ours, daemons = socket.socketpair()
    daemons.sendall(b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream"
                    b"\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
                    + _frame(1, b"marker\n") + _frame(2, b"a warning\n") + _frame(1, b"1\n"))
    daemons.close()  # the exec ended: all it wrote is in the one packet
    response = http.client.HTTPResponse(ours)
    response.begin()  # reads the headers, and buffers the frames behind them
    if path == "socket":  # benchflow's own request over the local socket (engine.py)
        monkeypatch.setattr(engine, "local_socket", lambda: "/unused.sock")
        monkeypatch.setattr(engine, "_open", lambda *a, **k: (ours, response))
    else:  # the Docker SDK's
        monkeypatch.setattr(engine, "local_socket", lambda: None)
        res = SimpleNamespace(raw=SimpleNamespace(_fp=response), close=response.close)
        api = docker.APIClient(base_url="unix:///nonexistent.sock", version="1.41")
        monkeypatch.setattr(api, "_post_json", lambda *a, **k: res)
        monkeypatch.setattr(api, "_raise_for_status", lambda r: None)
        monkeypatch.setattr(calls, "docker_client", lambda: SimpleNamespace(api=api))
    capture = OutputCapture()
    try:
        calls.pump("exec-id", capture)
    finally:
        ours.close()
    result = capture.result(0, False)
    assert (result.stdout, result.stderr) == (b"marker\n1\n", b"a warning\n")


@pytest.mark.anyio
async def test_a_live_process_gets_the_output_buffered_with_the_headers_too():
    from benchflow.sandbox.docker.process import DockerProcess

    ours, daemons = socket.socketpair()
    daemons.sendall(b"HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"
                    + _frame(1, b"ready\n"))
    response = http.client.HTTPResponse(ours)
    response.begin()
    sock_io = response.fp.raw  # what the SDK's exec_start(socket=True) returns
    sock_io._response = SimpleNamespace(raw=SimpleNamespace(_fp=response))

    async def exit_code() -> int | None:
        return None

    async def kill() -> None:
        daemons.close()

    process = DockerProcess(ours, sock_io, exit_code, kill)
    try:
        with anyio.fail_after(60):  # not a bound on speed: the lost bytes never come
            assert await process.stdout.receive() == b"ready\n"
            daemons.sendall(_frame(1, b"later\n"))  # and what comes after, from the socket
            assert await process.stdout.receive() == b"later\n"
    finally:
        daemons.close()
        response.close()
        ours.close()
