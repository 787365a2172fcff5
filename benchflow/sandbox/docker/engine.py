"""The Engine API requests of a plain rollout, on the standard library.

A plain rollout asks the daemon a dozen things: does it answer (`ping`), is the image there
(`image_exists`), create and start the container (`create`, `start`), upload and download
files (`put_archive`, `get_archive`), run commands (`exec_create`, `exec_output`,
`exec_inspect`), look at the container (`inspect`) and remove it (`remove`). Over the
daemon's local unix socket they are sent here with `http.client`, so that none needs the
Docker SDK (docker, requests, urllib3: ~70-100 ms of CPU to import, before the container
is even created): `benchflow run` starts its first sandbox that much sooner, and a plain
run never imports the SDK. What else the backend does (builds, pulls, snapshots,
networks, volumes, live processes) stays on the SDK.

Only the plain setup goes this way (`local_socket`): a unix socket, no TLS, no CLI context,
no proxies in the CLI's config. Anything else (tcp, ssh, TLS, a context, create options
this module does not translate) returns None: the caller makes that request with the SDK.
A ping or an image lookup that gets no plain answer returns None too (the SDK asks again
and fails as it always did); any other request the daemon refuses raises `Refused`, one it
did not answer `Unanswered`, which `errors.map_docker_errors` words as the SDK's own
failures. Request bodies are the SDK's (the create body is checked against the SDK's own
in `tests/unit/sandbox/test_docker_engine.py`, the rest on the real daemon in
`tests/integration/test_docker_socket_path.py`).
"""

from __future__ import annotations

import functools
import http.client
import json
import socket
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchflow.settings import host_env

DEFAULT_SOCKET = "/var/run/docker.sock"
TIMEOUT_SEC = 60.0
"""The Docker SDK's default timeout for a request."""

_CREATE_KEYS = frozenset({
    "image", "command", "name", "init", "detach", "labels", "environment", "nano_cpus",
    "mem_limit", "pids_limit", "network", "network_mode", "runtime", "volumes", "working_dir",
    "storage_opt"})
"""The `containers.create` options `create_body` translates (a sandbox's start uses these)."""


class Refused(Exception):
    """The daemon refused a create or start: its status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class Unanswered(Exception):
    """A create or start sent over the local socket got no answer (the daemon went away)."""


def local_socket() -> str | None:
    """The daemon's unix socket when the Docker SDK would talk to it plainly (DOCKER_HOST
    unset or `unix://`; no TLS variables; no CLI context or proxies in the CLI's config);
    None otherwise (the SDK does it all)."""
    return _local_socket(tuple(host_env(name) for name in _SETUP_VARIABLES))


_SETUP_VARIABLES = ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_HOST", "DOCKER_CONTEXT",
                    "DOCKER_CONFIG", "HOME")


@functools.lru_cache(maxsize=8)
def _local_socket(setup: tuple[str | None, ...]) -> str | None:
    # Once per setup, as the SDK reads it once per client: every request of every rollout
    # asks, and the CLI config's lookup is up to three opens.
    tls_verify, cert_path, host, context, config_folder, _ = setup
    if tls_verify is not None or cert_path:
        return None
    if host:
        if not host.startswith("unix://") or len(host) <= len("unix://"):
            return None
        path = host[len("unix://"):]
    else:
        if context not in (None, "", "default"):
            return None
        path = DEFAULT_SOCKET
    return path if _plain_cli_config(config_folder) else None


def _plain_cli_config(folder: str | None) -> bool:
    """Whether the Docker CLI config the SDK reads (the first of `$DOCKER_CONFIG/config.json`,
    `~/.docker/config.json`, `~/.dockercfg` that exists) sets no proxies and no context."""
    home = Path.home()
    paths = [Path(folder) / "config.json"] if folder else []
    for path in (*paths, home / ".docker" / "config.json", home / ".dockercfg"):
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        except OSError:
            return False
        if path.name == ".dockercfg":
            return True  # the legacy file holds credentials only
        try:
            config = json.loads(text)
        except ValueError:
            return False
        return (isinstance(config, dict) and not config.get("proxies")
                and not config.get("detachKeys")
                and config.get("currentContext") in (None, "", "default"))
    return True


def create_body(kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The JSON body of `POST /containers/create` that the Docker SDK's
    `containers.create(**kwargs)` sends (without `name`, a query parameter); None for an
    option or value it does not cover (the SDK then creates)."""
    if set(kwargs) - _CREATE_KEYS or kwargs.get("volumes") or not isinstance(
            kwargs.get("command"), list):
        return None
    env = kwargs.get("environment") or {}
    if not all(isinstance(v, str) for v in env.values()):
        return None
    host: dict[str, Any] = {}
    memory = kwargs.get("mem_limit")
    if memory is not None:
        if isinstance(memory, str) and memory[:-1].isdigit() and memory[-1:] == "m":
            memory = int(memory[:-1]) << 20
        if not isinstance(memory, int):
            return None
        host["Memory"] = memory
    network = kwargs.get("network")
    host["NetworkMode"] = network or kwargs.get("network_mode") or "default"
    if kwargs.get("pids_limit"):
        host["PidsLimit"] = kwargs["pids_limit"]
    if kwargs.get("storage_opt") is not None:
        host["StorageOpt"] = kwargs["storage_opt"]
    if kwargs.get("init") is not None:
        host["Init"] = kwargs["init"]
    if kwargs.get("nano_cpus"):
        host["NanoCpus"] = kwargs["nano_cpus"]
    if kwargs.get("runtime"):
        host["Runtime"] = kwargs["runtime"]
    detach = bool(kwargs.get("detach"))
    body: dict[str, Any] = {
        "Tty": False, "OpenStdin": False, "StdinOnce": False, "AttachStdin": False,
        "AttachStdout": not detach, "AttachStderr": not detach,
        "Env": [f"{k}={v}" for k, v in env.items()] or None,
        "Cmd": kwargs["command"], "Image": kwargs.get("image"), "NetworkDisabled": False,
        "WorkingDir": kwargs.get("working_dir"), "HostConfig": host,
        "NetworkingConfig": {network: None} if network else None,
        "Labels": kwargs.get("labels"),
    }
    return {k: v for k, v in body.items() if v is not None}  # as the SDK's _post_json


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=TIMEOUT_SEC)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def _open(path: str, method: str, url: str, body: dict[str, Any] | bytes | None = None,
          headers: Mapping[str, str] | None = None
          ) -> tuple[_UnixConnection, http.client.HTTPResponse]:
    """Send one request; the connection and the response, its headers read (the caller
    closes the connection)."""
    conn = _UnixConnection(path)
    try:
        if isinstance(body, dict):
            body = json.dumps(body).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        conn.request(method, url, body, dict(headers or {}))
        return conn, conn.getresponse()
    except BaseException:
        conn.close()
        raise


def _request(path: str, method: str, url: str,
             body: dict[str, Any] | bytes | None = None) -> tuple[int, Any]:
    """Send one request. The status and the decoded JSON answer (None when empty or not
    JSON).

    Raises:
        OSError, http.client.HTTPException: the daemon could not be asked or did not answer.
    """
    conn, response = _open(path, method, url, body)
    try:
        data = response.read()
    finally:
        conn.close()
    try:
        return response.status, json.loads(data) if data else None
    except ValueError:
        return response.status, None


def ping() -> bool:
    """Whether the local daemon answers `GET /_ping` (False: not plain, or no answer)."""
    path = local_socket()
    try:
        return path is not None and _request(path, "GET", "/_ping")[0] == 200
    except (OSError, http.client.HTTPException):
        return False


def image_exists(tag: str) -> bool | None:
    """Whether image `tag` is on the local daemon; None: not known (ask the SDK)."""
    path = local_socket()
    if path is None:
        return None
    try:
        status = _request(path, "GET", f"/images/{urllib.parse.quote(tag, safe='/:')}/json")[0]
    except (OSError, http.client.HTTPException):
        return None
    return {200: True, 404: False}.get(status)


def _refused(status: int, data: Any) -> Refused:
    message = data.get("message") if isinstance(data, dict) else None
    return Refused(status, str(message or f"HTTP {status}"))


def _sent(path: str, url: str, body: dict[str, Any] | bytes | None = None,
          method: str = "POST") -> tuple[int, Any]:
    """Send a request; raises Refused for a status of 400 or more, Unanswered for none."""
    try:
        status, data = _request(path, method, url, body)
    except (OSError, http.client.HTTPException) as exc:
        raise Unanswered(f"{type(exc).__name__}: {exc}") from exc
    if status >= 400:
        raise _refused(status, data)
    return status, data


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="/:")  # as the SDK's `_url`


def create(name: str, kwargs: Mapping[str, Any]) -> str | None:
    """Create container `name` as `containers.create(name=name, **kwargs)` would; its id.
    None: not plain, or options `create_body` does not cover (ask the SDK).

    Raises:
        Refused: the daemon refused it (nothing was made).
        Unanswered: no answer.
    """
    path, body = local_socket(), create_body(kwargs)
    if path is None or body is None:
        return None
    _, data = _sent(path, f"/containers/create?{urllib.parse.urlencode({'name': name})}", body)
    if not isinstance(data, dict) or not isinstance(data.get("Id"), str):
        raise Unanswered(f"the daemon's answer to a create has no id: {data!r}")
    return data["Id"]


# Each request below: None when the setup is not plain (ask the SDK); raises Refused (the
# daemon said no: 4xx, 5xx) or Unanswered (no answer).

def start(container_id: str) -> bool | None:
    """Start the container."""
    path = local_socket()
    if path is None:
        return None
    _sent(path, f"/containers/{_quote(container_id)}/start")
    return True


def inspect(container_id: str, *, size: bool = False) -> dict[str, Any] | None:
    """`GET /containers/{id}/json` (with `size`: the writable layer's size too)."""
    path = local_socket()
    if path is None:
        return None
    query = "?size=1" if size else ""
    return _sent(path, f"/containers/{_quote(container_id)}/json{query}", method="GET")[1]


def put_archive(container_id: str, folder: str, data: bytes) -> bool | None:
    """Unpack tar `data` under `folder` in the container; whether the daemon said 200."""
    path = local_socket()
    if path is None:
        return None
    query = urllib.parse.urlencode({"path": folder})
    status, _ = _sent(path, f"/containers/{_quote(container_id)}/archive?{query}", data,
                      method="PUT")
    return status == 200


def remove(container_id: str) -> bool | None:
    """Remove the container, forced, with its anonymous volumes."""
    path = local_socket()
    if path is None:
        return None
    _sent(path, f"/containers/{_quote(container_id)}?v=True&link=False&force=True",
          method="DELETE")
    return True


def exec_create(container_id: str, argv: list[str], *, user: str, workdir: str | None,
                environment: Mapping[str, str]) -> str | None:
    """A new exec of `argv` (stdout and stderr attached, no TTY, no stdin); its id."""
    path = local_socket()
    if path is None:
        return None
    body: dict[str, Any] = {
        "Container": container_id, "User": user, "Privileged": False, "Tty": False,
        "AttachStdin": False, "AttachStdout": True, "AttachStderr": True, "Cmd": argv,
        "Env": [f"{k}={v}" for k, v in environment.items()]}
    if workdir is not None:
        body["WorkingDir"] = workdir
    _, data = _sent(path, f"/containers/{_quote(container_id)}/exec", body)
    if not isinstance(data, dict) or not isinstance(data.get("Id"), str):
        raise Unanswered(f"the daemon's answer to an exec create has no id: {data!r}")
    return data["Id"]


def exec_inspect(exec_id: str) -> dict[str, Any] | None:
    """`GET /exec/{id}/json`."""
    path = local_socket()
    if path is None:
        return None
    return _sent(path, f"/exec/{_quote(exec_id)}/json", method="GET")[1]


class Stream:
    """An open response read as it arrives; `close()` ends it (and its connection)."""

    def __init__(self, conn: _UnixConnection, response: http.client.HTTPResponse) -> None:
        self._conn = conn
        self.response = response

    def close(self) -> None:
        self.response.close()
        self._conn.close()


def _stream(method: str, url: str, body: dict[str, Any] | None = None,
            headers: Mapping[str, str] | None = None) -> Stream | None:
    path = local_socket()
    if path is None:
        return None
    try:
        conn, response = _open(path, method, url, body, headers)
    except (OSError, http.client.HTTPException) as exc:
        raise Unanswered(f"{type(exc).__name__}: {exc}") from exc
    if response.status >= 400:
        try:
            data = response.read()
        except (OSError, http.client.HTTPException):
            data = b""
        finally:
            conn.close()
        try:
            raise _refused(response.status, json.loads(data) if data else None)
        except ValueError:
            raise _refused(response.status, None) from None
    return Stream(conn, response)


def exec_output(exec_id: str) -> tuple[Stream, Any] | None:
    """Start the exec, attached: its stream and the reader of its multiplexed frames (the
    socket's buffered reader after the 101 headers, no timeout: a command may run silent
    for minutes)."""
    stream = _stream("POST", f"/exec/{_quote(exec_id)}/start", {"Tty": False, "Detach": False},
                     {"Connection": "Upgrade", "Upgrade": "tcp"})
    if stream is None:
        return None
    reader = stream.response.fp
    if reader is None:
        stream.close()
        raise Unanswered("the daemon closed an exec's stream before its output")
    sock = getattr(getattr(reader, "raw", None), "_sock", None)
    if sock is not None:
        sock.settimeout(None)
    return stream, reader


def get_archive(container_id: str, folder: str) -> Stream | None:
    """A tar stream of `folder` in the container (read it with `response.read(n)`)."""
    query = urllib.parse.urlencode({"path": folder})
    return _stream("GET", f"/containers/{_quote(container_id)}/archive?{query}",
                   headers={"Accept-Encoding": "identity"})


__all__ = ["Refused", "Stream", "Unanswered", "create", "create_body", "exec_create",
           "exec_inspect", "exec_output", "get_archive", "image_exists", "inspect",
           "local_socket", "ping", "put_archive", "remove", "start"]
