"""`COPY --chmod` builds through benchflow's legacy (Engine API) builder with the mode applied.

Harbor's separate-verifier examples write their verifier image with
`COPY --chmod=755 test.sh /tests/test.sh`; the legacy builder rejects the flag, so benchflow
rewrites the single-file form (benchflow/sandbox/images.py, `legacy_chmod`).
"""

from __future__ import annotations

import secrets
from pathlib import Path

import docker
import pytest

from benchflow.sandbox.docker.images import build_image

pytestmark = [pytest.mark.docker]


def test_copy_chmod_of_one_file_builds_with_its_mode(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nWORKDIR /app\n"
        "COPY --chmod=750 hello.sh /opt/tools/hello.sh\n"
        "COPY --chmod=0604 note.txt note.txt\n")
    (tmp_path / "hello.sh").write_text("#!/bin/sh\necho hi\n")
    (tmp_path / "note.txt").write_text("n\n")
    (tmp_path / "hello.sh").chmod(0o644)
    client = docker.from_env()
    tag = f"benchflow-test/copy-chmod:{secrets.token_hex(6)}"
    try:
        build_image(client, tag, tmp_path, [], 300, tmp_path / "build.log")
        out = client.containers.run(tag, ["stat", "-c", "%a %n", "/opt/tools/hello.sh",
                                          "/app/note.txt"], remove=True)
        assert out.decode().split("\n")[:2] == ["750 /opt/tools/hello.sh", "604 /app/note.txt"]
    finally:
        try:
            client.images.remove(tag, force=True)
        except docker.errors.ImageNotFound:
            pass
