"""Task images for the docker backend: content-addressed tags, builds, pulls.

A task's image tag is a hash of its `environment/` folder (paths, modes, bytes) and of
the extra CA certificates baked in, so an unchanged environment is never rebuilt. The
Dockerfile is built unchanged except that, when CA certificates are given, each stage
gets them installed right after its FROM (pip and npm inside RUN steps then work behind
a TLS-intercepting proxy), and that `COPY --chmod` of a single file, which the Engine API's
legacy builder rejects, becomes a COPY plus a chmod (`legacy_chmod`).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
import urllib3.exceptions

from benchflow.errors import ImagePullError, SandboxBuildError, SandboxBuildTimeout
from benchflow.sandbox import certs
from benchflow.sandbox.docker_errors import is_transient

log = logging.getLogger(__name__)

_BUILD_RECIPE_VERSION = "1"  # bump when the way images are derived changes
_CA_CONTEXT = ".benchflow-ca"
_FROM = re.compile(r"^\s*FROM\s", re.IGNORECASE)
_SCRATCH = re.compile(r"^\s*FROM\s+(--\S+\s+)*scratch(\s|$)", re.IGNORECASE)


def image_tag(name: str, environment_dir: Path, pems: list[bytes]) -> str:
    """`benchflow/<name>:<hash>` where the hash covers everything that shapes the image."""
    digest = hashlib.sha256(_BUILD_RECIPE_VERSION.encode())
    for path in sorted(p for p in environment_dir.rglob("*") if p.is_file() or p.is_symlink()):
        rel = path.relative_to(environment_dir).as_posix()
        digest.update(rel.encode() + b"\0")
        if path.is_symlink():
            digest.update(b"link:" + str(path.readlink()).encode())
        else:
            digest.update(oct(path.stat().st_mode & 0o777).encode())
            digest.update(path.read_bytes())
        digest.update(b"\0")
    if pems:
        digest.update(b"ca:" + certs.certs_digest(pems).encode())
    repo = re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-.") or "task"
    return f"benchflow/{repo}:{digest.hexdigest()[:16]}"


def inject_ca(dockerfile: str) -> str:
    """Install the CA certificates after every FROM, before the stage's own steps.

    `FROM scratch` stages are left alone: they have no shell to run the installer.
    """
    steps = (
        f"COPY {_CA_CONTEXT}/ {certs.CA_DIR}/\n"
        f"RUN sh {certs.INSTALL_SCRIPT}\n"
        "ENV " + " ".join(f"{k}={v}" for k, v in certs.CA_ENV.items()) + "\n"
    )
    out = []
    for line in dockerfile.splitlines(keepends=True):
        out.append(line)
        if _FROM.match(line) and not _SCRATCH.match(line):
            out.append(("" if line.endswith("\n") else "\n") + steps)
    return "".join(out)


_COPY_CHMOD = re.compile(
    r"^(?P<indent>\s*)(?P<op>COPY|ADD)\s+(?P<flags>(?:--\S+\s+)*)(?P<args>[^\[\s].*?)\s*$",
    re.IGNORECASE)


def legacy_chmod(dockerfile: str) -> str:
    """`COPY --chmod=MODE SRC DST` for the legacy builder, which lacks `--chmod` (BuildKit only).

    benchflow builds through the Docker Engine API without BuildKit. The single-source,
    file-destination form that task Dockerfiles use (`COPY --chmod=755 test.sh /tests/test.sh`)
    becomes the same COPY without the flag plus `RUN chmod MODE DST`: the same file, the same
    mode. Other forms (several sources, a directory destination, JSON arguments, scratch
    stages with no shell) are left unchanged, so the build still fails with Docker's message.
    """
    out, scratch = [], False
    for line in dockerfile.splitlines(keepends=True):
        if _FROM.match(line):
            scratch = bool(_SCRATCH.match(line))
        m = _COPY_CHMOD.match(line.rstrip("\n"))
        flags = m.group("flags").split() if m else []
        chmod = [f for f in flags if f.lower().startswith("--chmod=")]
        args = m.group("args").split() if m else []
        if (not m or len(chmod) != 1 or scratch or len(args) != 2 or args[1].endswith("/")
                or args[1].endswith("\\")):
            out.append(line)
            continue
        mode = chmod[0].split("=", 1)[1]
        kept = "".join(f + " " for f in flags if f is not chmod[0])
        indent, op = m.group("indent"), m.group("op")
        out.append(f"{indent}{op} {kept}{args[0]} {args[1]}\n{indent}RUN chmod {mode} {args[1]}\n")
    return "".join(out)


def final_stage_has_ca(environment_dir: Path) -> bool:
    """Whether `inject_ca` installs the CAs in the image's final stage (not `FROM scratch`)."""
    try:
        lines = (environment_dir / "Dockerfile").read_text().splitlines()
    except OSError:
        return False
    stages = [line for line in lines if _FROM.match(line)]
    return bool(stages) and not _SCRATCH.match(stages[-1])


def build_context(environment_dir: Path, pems: list[bytes]) -> io.BytesIO:
    """A tar of the environment folder, with the CA files and rewritten Dockerfile if needed."""
    buf = io.BytesIO()
    original = (environment_dir / "Dockerfile").read_text()
    text = legacy_chmod(inject_ca(original) if pems else original)
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted(environment_dir.iterdir()):
            if text != original and path.name == "Dockerfile":
                continue
            tar.add(path, arcname=path.name)
        if text != original:
            _add_bytes(tar, "Dockerfile", text.encode())
        if pems:
            for name, data in certs.ca_files(pems).items():
                _add_bytes(tar, f"{_CA_CONTEXT}/{name}", data, 0o755 if name.endswith(".sh") else 0o644)
    buf.seek(0)
    return buf


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


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
