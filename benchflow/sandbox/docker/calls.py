"""A docker sandbox's requests, each over the daemon's local socket without the SDK
(`engine.py`) when the setup is plain, else by the Docker SDK (imported then). Blocking:
called in worker threads (`errors.docker_call`), which map what fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchflow.sandbox.archive import extract as _extract
from benchflow.sandbox.docker import engine
from benchflow.sandbox.docker.errors import docker_client, in_flight
from benchflow.sandbox.docker.process import FRAME_HEADER, buffered_reader
from benchflow.sandbox.output import STDERR, STDOUT, OutputCapture


def refusal_status(exc: BaseException | None) -> int | None:
    """The HTTP status of a daemon's refusal (over the socket or through the SDK)."""
    if isinstance(exc, engine.Refused):
        return exc.status
    return getattr(exc, "status_code", None) if exc is not None else None


def inspect(container_id: str) -> dict[str, Any]:
    info = engine.inspect(container_id)
    return info if info is not None else docker_client().api.inspect_container(container_id)


def put_archive(container_id: str, path: str, data: bytes) -> bool:
    ok = engine.put_archive(container_id, path, data)
    return ok if ok is not None else docker_client().api.put_archive(container_id, path, data)


def exec_create(container_id: str, argv: list[str], *, user: str, workdir: str | None,
                environment: dict[str, str], stdin: bool = False) -> str:
    exec_id = None if stdin else engine.exec_create(container_id, argv, user=user,
                                                    workdir=workdir, environment=environment)
    if exec_id is not None:
        return exec_id
    return docker_client().api.exec_create(container_id, argv, user=user, workdir=workdir,
                                           environment=environment, stdin=stdin)["Id"]


def exec_inspect(exec_id: str) -> dict[str, Any]:
    info = engine.exec_inspect(exec_id)
    return info if info is not None else docker_client().api.exec_inspect(exec_id)


def _read_frames(reader: Any, capture: OutputCapture) -> None:
    # Read through http.client's buffered reader, not the raw socket under it (as the
    # SDK's _read_from_socket does): frames that came in the same packet as the 101
    # headers are in its buffer already, and a fast exec under load lost its output.
    while len(header := reader.read(FRAME_HEADER.size)) == FRAME_HEADER.size:
        stream, size = FRAME_HEADER.unpack(header)
        data = reader.read(size)
        if data and stream in (STDOUT, STDERR):
            capture.write(stream, data)


def pump(exec_id: str, capture: OutputCapture) -> None:
    """Start the exec and hand each frame to `capture` as it arrives (a worker thread)."""
    opened = engine.exec_output(exec_id)
    if opened is not None:
        stream, reader = opened
        try:
            _read_frames(reader, capture)
        finally:
            stream.close()
        return
    api = docker_client().api
    # exec_start(stream=True) without its CancellableStream, whose close leaks the socket
    res = api._post_json(api._url("/exec/{0}/start", exec_id), data={"Tty": False,
                         "Detach": False}, headers={"Connection": "Upgrade", "Upgrade": "tcp"},
                         stream=True)
    try:
        api._raise_for_status(res)
        reader = buffered_reader(res)
        assert reader is not None, "requests' response without http.client's reader"
        api._disable_socket_timeout(reader.raw)  # a silent test.sh may run for minutes
        _read_frames(reader, capture)
    finally:
        res.close()


def inspect_with_size(container_id: str) -> dict[str, Any]:
    """`GET /containers/{id}/json?size=1` (the SDK's inspect cannot ask for sizes)."""
    info = engine.inspect(container_id, size=True)
    if info is not None:
        return info
    api = docker_client().api
    res = api._get(api._url("/containers/{0}/json", container_id), params={"size": 1})
    return dict(api._result(res, True))


def download(container_id: str, src: str, dst: Path, limit_mb: int | None) -> str | None:
    """`get_archive`, read as it arrives (never whole in memory) and closed when done."""
    limit = None if limit_mb is None else limit_mb << 20
    stream = engine.get_archive(container_id, src)
    if stream is not None:
        try:
            return _extract(iter(lambda: stream.response.read(1 << 20), b""), src, dst, limit)
        finally:
            stream.close()
    api = docker_client().api
    res = api._get(api._url("/containers/{0}/archive", container_id), params={"path": src},
                   stream=True, headers={"Accept-Encoding": "identity"})
    try:
        api._raise_for_status(res)
        return _extract(res.iter_content(1 << 20), src, dst, limit)
    finally:
        res.close()


def image_exists(tag: str) -> bool:
    known = engine.image_exists(tag)
    if known is not None:
        return known
    from benchflow.sandbox.docker import images as docker_images

    return docker_images.image_exists(docker_client(), tag)


def create(kwargs: dict[str, Any]) -> str:
    """The new container's id: created over the local socket without the SDK (engine.py)
    when the setup is plain and `engine.create_body` covers the options, else by the SDK.
    A refusal raises either way (`engine.Refused`, the SDK's APIError)."""
    with in_flight.request(creates=True):
        created = engine.create(kwargs["name"], {k: v for k, v in kwargs.items() if k != "name"})
        return created or docker_client().containers.create(**kwargs).id


def create_with_quota(kwargs: dict[str, Any], storage_mb: int) -> str | None:
    """The container's id, with a disk quota; None when the daemon's storage driver has
    none (quotas need overlay2 on xfs with pquota; the daemon says so only in words)."""
    try:
        return create({**kwargs, "storage_opt": {"size": f"{storage_mb}M"}})
    except engine.Refused as exc:
        if "storage" in exc.message.lower():
            return None
        raise
    except Exception as exc:
        import docker.errors

        if (isinstance(exc, docker.errors.APIError)
                and "storage" in str(exc.explanation or exc).lower()):
            return None
        raise


def start(container_id: str) -> None:
    if not engine.start(container_id):
        docker_client().api.start(container_id)


def remove_or_stop(container_id: str, delete: bool) -> None:
    """Remove (or stop) the container; one already gone is fine."""
    try:
        with in_flight.request(creates=False):
            if delete and engine.remove(container_id):
                return
            api = docker_client().api
            if delete:
                api.remove_container(container_id, force=True, v=True)
            else:
                api.stop(container_id, timeout=5)
    except Exception as exc:
        if refusal_status(exc) != 404:  # gone already
            raise


__all__ = ["create", "create_with_quota", "download", "exec_create", "exec_inspect",
           "image_exists", "inspect", "inspect_with_size", "pump", "put_archive",
           "refusal_status", "remove_or_stop", "start"]
