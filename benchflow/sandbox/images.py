"""Task images, for every backend: content-addressed tags and the build context.

A task's image tag is a hash of its `environment/` folder (paths, modes, bytes) and of
the extra CA certificates baked in, so an unchanged environment is never rebuilt. The
Dockerfile is built unchanged except that, when CA certificates are given, each stage
gets them installed right after its FROM (pip and npm inside RUN steps then work behind
a TLS-intercepting proxy), and that `COPY --chmod` of a single file, which the Engine API's
legacy builder rejects, becomes a COPY plus a chmod (`legacy_chmod`). No SDK is imported
here: docker builds and pulls with these in `docker/images.py`, Daytona and Modal upload
the same context.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import tarfile
import time
from pathlib import Path


from benchflow.sandbox import certs

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
