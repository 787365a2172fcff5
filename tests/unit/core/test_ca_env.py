"""ca_env.sh decides each CA variable of a running sandbox: only files that exist, and an
image's working value kept (with benchflow's certificates added). Run on the host here;
in a container with a prebuilt image in tests/integration/test_task_conventions.py."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from benchflow.sandbox import certs


def run(tmp_path, env: dict[str, str]) -> dict[str, str]:
    argv = certs.ca_env_argv()
    argv[-3:] = [str(tmp_path / "extra.pem"), str(tmp_path / "system.pem"), str(tmp_path)]
    done = subprocess.run(argv, env={"PATH": "/usr/bin:/bin", **env}, capture_output=True,
                          check=True)
    return certs.parse_ca_env(done.stdout)


def test_only_existing_files_and_the_images_own_value_is_kept(tmp_path):
    (tmp_path / "extra.pem").write_text("OURS\n")
    (tmp_path / "system.pem").write_text("SYSTEM\n")
    (tmp_path / "image.pem").write_text("IMAGE\n")
    found = run(tmp_path, {"NODE_EXTRA_CA_CERTS": str(tmp_path / "image.pem"),
                           "SSL_CERT_FILE": "/nonexistent.pem",
                           "PIP_CERT": str(tmp_path / "system.pem")})
    merged = tmp_path / "NODE_EXTRA_CA_CERTS.pem"
    assert found == {"NODE_EXTRA_CA_CERTS": str(merged),  # the image's file plus ours
                     "SSL_CERT_FILE": str(tmp_path / "system.pem"),  # its value was missing
                     "REQUESTS_CA_BUNDLE": str(tmp_path / "system.pem")}  # PIP_CERT: already ours
    assert merged.read_text() == "IMAGE\nOURS\n"


def test_nothing_points_at_a_missing_file(tmp_path):
    (tmp_path / "extra.pem").write_text("OURS\n")  # no system bundle in this image
    assert run(tmp_path, {}) == {"NODE_EXTRA_CA_CERTS": str(tmp_path / "extra.pem")}


def test_parse_keeps_only_ca_variables_with_absolute_paths():
    out = b"NODE_EXTRA_CA_CERTS=/a.pem\nLD_PRELOAD=/evil.so\nPIP_CERT=relative\ngarbage\n"
    assert certs.parse_ca_env(out) == {"NODE_EXTRA_CA_CERTS": "/a.pem"}


def test_script_passes_shellcheck():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not installed")
    done = subprocess.run([shellcheck, "-s", "sh", "-S", "warning", "-"],
                          input=certs.ca_env_argv()[2], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stdout
