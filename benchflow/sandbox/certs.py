"""Extra CA certificates for sandboxes behind TLS-intercepting proxies.

The PEM files go to Debian's local-CA folder, so `update-ca-certificates` (run now when
present, or later by the ca-certificates package's own postinst) folds them into the
system bundle. Node reads them through `NODE_EXTRA_CA_CERTS`; pip, requests and OpenSSL
through the system bundle, which `install_ca.sh` creates when the image has none.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from benchflow.errors import ConfigError

CA_DIR = "/usr/local/share/ca-certificates/benchflow"
CA_BUNDLE = f"{CA_DIR}/extra.pem"
INSTALL_SCRIPT = f"{CA_DIR}/install_ca.sh"
SYSTEM_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

CA_ENV = {
    "NODE_EXTRA_CA_CERTS": CA_BUNDLE,
    "SSL_CERT_FILE": SYSTEM_BUNDLE,
    "REQUESTS_CA_BUNDLE": SYSTEM_BUNDLE,
    "PIP_CERT": SYSTEM_BUNDLE,
}
"""Environment that points TLS clients at the certificates (set only when certs are given).

Built images get it as `ENV` (the files are installed in the same build). A running sandbox
decides per variable with `ca_env_argv()`, after the files are in place: a variable is only
ever set to a file that exists, and a working value of the image is kept (with these
certificates added), never overridden."""


def ca_env_argv() -> list[str]:
    """The root command that prints `VAR=VALUE` for each CA variable an exec must carry."""
    text = (Path(__file__).parent / "scripts" / "ca_env.sh").read_text()
    return ["sh", "-c", text, "ca_env", CA_BUNDLE, SYSTEM_BUNDLE, CA_DIR]


def parse_ca_env(stdout: bytes) -> dict[str, str]:
    """`ca_env_argv()`'s output: only CA_ENV's variables, only absolute paths."""
    found = {}
    for line in stdout.decode("utf-8", "replace").splitlines():
        name, sep, value = line.partition("=")
        if sep and name in CA_ENV and value.startswith("/"):
            found[name] = value
    return found


def read_certs(paths: tuple[Path, ...]) -> list[bytes]:
    """Read and sanity-check the PEM files; a bad path is a ConfigError naming it."""
    pems = []
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"extra CA certificate {path}: cannot read ({exc.strerror}); "
                              "fix the path in --ca-cert / BENCHFLOW_EXTRA_CA_CERTS") from exc
        if b"-----BEGIN CERTIFICATE-----" not in data:
            raise ConfigError(f"extra CA certificate {path}: not a PEM certificate "
                              "(expected '-----BEGIN CERTIFICATE-----')")
        pems.append(data if data.endswith(b"\n") else data + b"\n")
    return pems


def ca_files(pems: list[bytes]) -> dict[str, bytes]:
    """The files to place under CA_DIR: one .crt per certificate, the bundle, the installer."""
    files = {f"benchflow-{i}.crt": pem for i, pem in enumerate(pems)}
    files["extra.pem"] = b"".join(pems)
    files["install_ca.sh"] = (Path(__file__).parent / "scripts" / "install_ca.sh").read_bytes()
    return files


def certs_digest(pems: list[bytes]) -> str:
    return hashlib.sha256(b"".join(pems)).hexdigest()
