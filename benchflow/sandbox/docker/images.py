"""Task images on the docker daemon: builds (with a deadline, a daemon that goes away is
retryable) and pulls, from the backend-neutral context of `images.py`."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from benchflow.errors import ImagePullError, SandboxBuildError, SandboxBuildTimeout
from benchflow.sandbox.docker.errors import is_transient
from benchflow.sandbox.images import build_context


def image_exists(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def build_image(
    client: docker.DockerClient,
    tag: str,
    environment_dir: Path,
    pems: list[bytes],
    timeout_sec: float,
    log_path: Path | None,
    labels: dict[str, str] | None = None,
) -> None:
    """Build `tag` from the environment folder (blocking; run in a worker thread), with
    `labels` (the job instance and owner of the build) besides `benchflow.managed`.

    Raises:
        SandboxBuildError: a step failed; the message ends with the log's tail.
        SandboxBuildTimeout: the build ran past `timeout_sec`.
    """
    deadline = time.monotonic() + timeout_sec
    lines: list[str] = []
    context = build_context(environment_dir, pems)
    stream = client.api.build(
        fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, decode=True,
        labels={"benchflow.managed": "true", **(labels or {})}, timeout=max(int(timeout_sec), 1),
    )
    error: str | None = None
    timeout_error = SandboxBuildTimeout("environment build", timeout_sec,
                                        f"image build exceeded build_timeout_sec={timeout_sec:g}")
    try:
        for chunk in _until_read_timeout(stream, timeout_error, "".join(lines)):
            if "stream" in chunk:
                lines.append(chunk["stream"])
            if "error" in chunk:
                error = chunk["error"].strip()
                lines.append(error + "\n")
            if time.monotonic() > deadline:
                raise timeout_error
    finally:
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log_path.write_text("".join(lines))
        stream.close()
    if error is not None:
        tail = "".join(lines)[-2000:]
        where = f" (full log: {log_path})" if log_path else ""
        # a step killed while the daemon goes away (a restart) is not the Dockerfile's fault
        cut = _KILLED_STEP.search(error) is not None and not _answers(client)
        note = " (the Docker daemon went away during the build: retryable)" if cut else ""
        raise SandboxBuildError(f"image build failed: {error}{note}{where}\n{tail}",
                                log="".join(lines), transient=cut)


_KILLED_STEP = re.compile(r"returned a non-zero code: (137|143)\b")


def _answers(client: docker.DockerClient) -> bool:
    try:
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException,
            urllib3.exceptions.HTTPError):
        return False
    return True


def _until_read_timeout(stream: Iterator[dict], timeout_error: Exception,
                        log: str = "") -> Iterator[dict]:
    """The build stream; the HTTP read timeout (our deadline) becomes `timeout_error`, a
    lost connection (the daemon restarting) a retryable SandboxBuildError.

    Closing the connection makes the daemon cancel the build.
    """
    try:
        yield from stream
    except (urllib3.exceptions.ReadTimeoutError, requests.exceptions.ReadTimeout) as exc:
        raise timeout_error from exc
    except (requests.exceptions.ConnectionError, urllib3.exceptions.HTTPError) as exc:
        # requests wraps a read timeout of a stream in its ConnectionError
        if any(isinstance(arg, urllib3.exceptions.ReadTimeoutError) for arg in exc.args):
            raise timeout_error from exc
        raise SandboxBuildError(f"image build failed: lost the Docker daemon during the "
                                f"build ({exc}): retryable", log=log, transient=True) from exc


def pull_image(client: docker.DockerClient, image: str) -> None:
    """Pull `image` (blocking). Raises ImagePullError naming the image."""
    repo, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "latest")
    try:
        client.api.pull(repo, tag=tag or "latest")
        client.images.get(image)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise ImagePullError(f"cannot pull docker_image {image!r}: {_short(exc)}. "
                             "Build it locally or fix environment.docker_image / "
                             "sandbox.docker_image", transient=is_transient(exc)) from exc


def _short(exc: Exception) -> str:
    if isinstance(exc, docker.errors.APIError):
        return str(exc.explanation or exc)
    return json.dumps(str(exc))[1:-1]
