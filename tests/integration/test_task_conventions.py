"""Harbor's task conventions, in real containers: env templates resolved from the host, and
CA variables that only ever point at files that exist (prebuilt images keep their own).

(`/solution`: the oracle of `fixtures/tasks/tb-ctrf` installs `/solution/hello.txt`, in
test_tb_template.py.)
"""

from __future__ import annotations

import io
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from typer.testing import CliRunner

from benchflow import RolloutConfig, Scene
from benchflow.cli.main import app
from benchflow.rollout import Rollout
from benchflow.sandbox.certs import CA_DIR, SYSTEM_BUNDLE
from benchflow.sandbox.docker import DockerSandbox
from benchflow.sandbox.spec import SandboxSpec

pytestmark = [pytest.mark.docker, pytest.mark.anyio, pytest.mark.timeout(600)]

FIXTURES = Path(__file__).parent / "fixtures" / "tasks"
TOKEN = "tok-fixture-5f3a9c1e"
FAKE_PEM = (b"-----BEGIN CERTIFICATE-----\nMIIBbenchflowtestonlynotarealcertificate\n"
            b"-----END CERTIFICATE-----\n")
IMAGE_PEM = (b"-----BEGIN CERTIFICATE-----\nMIIBtheimagesowncertificate\n"
             b"-----END CERTIFICATE-----\n")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


async def test_env_templates_oracle_scores_one_hardened(tmp_path, job_label, monkeypatch):
    monkeypatch.setenv("BF_FIXTURE_TOKEN", TOKEN)
    monkeypatch.delenv("BF_FIXTURE_GREETING", raising=False)
    config = RolloutConfig(task_path=FIXTURES / "env-template", scenes=[Scene.single("oracle")],
                           harden=True, jobs_dir=tmp_path, job_name=job_label)
    run = Rollout(config)
    result = await run.run()
    assert (result.reward, result.error) == (1.0, None), run.paths.root
    for path in run.paths.root.rglob("*"):  # a host value is a secret: never in our files
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_env_templates_unset_variable_stops_the_run(tmp_path, monkeypatch):
    monkeypatch.delenv("BF_FIXTURE_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["run", str(FIXTURES / "env-template"),
                                      "--jobs-dir", str(tmp_path / "jobs")])
    text = result.output + (getattr(result, "stderr", "") or "")
    assert result.exit_code == 2, text
    assert "[verifier.env] EXPECTED_TOKEN" in text and "BF_FIXTURE_TOKEN is not set" in text
    assert "[solution.env] TOKEN" in text and "Traceback" not in text
    assert not (tmp_path / "jobs").exists()


@pytest.fixture(scope="module")
def prebuilt_image() -> Iterator[str]:
    """A prebuilt image (no Dockerfile for benchflow to inject into) with CA variables of its
    own: one pointing at a working file, one at a file that does not exist."""
    dockerfile = (b"FROM debian:bookworm-slim\nCOPY image-ca.pem /etc/image-ca.pem\n"
                  b"ENV NODE_EXTRA_CA_CERTS=/etc/image-ca.pem SSL_CERT_FILE=/nonexistent.pem\n")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("Dockerfile", dockerfile), ("image-ca.pem", IMAGE_PEM)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    buf.seek(0)
    tag = f"benchflow-test/ca-prebuilt:{uuid.uuid4().hex[:12]}"
    client = docker.from_env()
    client.images.build(fileobj=buf, custom_context=True, tag=tag, rm=True)
    try:
        yield tag
    finally:
        client.images.remove(tag, force=True)


async def test_ca_variables_point_only_at_existing_files_and_keep_the_images_own(
        prebuilt_image, tmp_path, job_label):
    pem = tmp_path / "extra.pem"
    pem.write_bytes(FAKE_PEM)
    sandbox = DockerSandbox(SandboxSpec(name="ca-prebuilt", docker_image=prebuilt_image,
                                        extra_ca_certs=(pem,), storage_mb=None, memory_mb=256,
                                        labels={"benchflow.job": job_label}))
    await sandbox.start()
    try:
        names = ("NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT")
        script = "for v in " + " ".join(names) + '; do eval "p=\\${$v}"; ' \
            'if [ -f "$p" ]; then echo "$v=$p ok"; else echo "$v=$p missing"; fi; done'
        result = await sandbox.exec(["sh", "-c", script], user="root")
        lines = dict(line.split("=", 1) for line in result.stdout.decode().splitlines())
        assert all(value.endswith(" ok") for value in lines.values()), lines
        node = lines["NODE_EXTRA_CA_CERTS"].removesuffix(" ok")
        assert node == f"{CA_DIR}/NODE_EXTRA_CA_CERTS.pem"  # the image's file plus ours
        merged = await sandbox.exec(["cat", node])
        assert IMAGE_PEM in merged.stdout and FAKE_PEM in merged.stdout
        assert lines["SSL_CERT_FILE"] == f"{SYSTEM_BUNDLE} ok"  # the image's path did not exist
        as_user = await sandbox.exec(["sh", "-c", "echo $NODE_EXTRA_CA_CERTS"], user="nobody")
        assert as_user.stdout.decode().strip() == node
    finally:
        await sandbox.stop(delete=True)
