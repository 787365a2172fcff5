"""The one reader of `os.environ`: every environment knob benchflow honours lives here.

| variable | meaning |
| --- | --- |
| `BENCHFLOW_EXTRA_CA_CERTS` | PEM files (`os.pathsep`-separated) installed into every sandbox, for TLS-intercepting proxies; unset: the host's `/usr/local/share/ca-certificates/*.crt` (Debian/Ubuntu's locally added CAs) when there are any; set but empty: none |
| `BENCHFLOW_AGENTS_PATH` | extra folders of agent manifests (`os.pathsep`-separated) |
| `BENCHFLOW_CACHE_DIR` | where fetched registry tasks and wheels are cached (default `~/.cache/benchflow`) |
| `BENCHFLOW_REGISTRY` | the registry.json (path or http(s) URL) `benchflow datasets` and `benchflow run NAME@VERSION` use by default |
| `OTEL_EXPORTER_OTLP_ENDPOINT` | (standard) an OTLP/HTTP collector: spans are exported there (needs the `otel` extra) |
| `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | (standard) the same, for traces only (wins over the above) |
| `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TRACES_HEADERS` | (standard) `k=v,k2=v2` headers for the collector (the tracing SDK's export) |
| `BENCHFLOW_CONFIG_DIR` | where `rollout login` keeps its 0600 config file (default `$XDG_CONFIG_HOME/benchflow`, else `~/.config/benchflow`) |
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any


HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
"""Where Debian and Ubuntu keep locally added CA certificates (a proxy's, a company's)."""


def _paths(value: str | None) -> tuple[Path, ...]:
    return tuple(Path(p).expanduser() for p in (value or "").split(os.pathsep) if p.strip())


def host_ca_certs(folder: Path = HOST_CA_DIR) -> tuple[Path, ...]:
    """The host's extra CA certificates (`*.crt` under `folder`, sorted), if any.

    Found again only when a folder of the last scan changed (its mtime: a file added,
    removed or renamed in it, or a subfolder made): every rollout asks, and a walk of the
    folder cost more than the rest of its settings.
    """
    scan = _CA_SCANS.get(folder)
    if scan is not None and scan[0] == _mtimes(scan[2]):
        return scan[1]
    started = time.time_ns()
    try:
        dirs = (folder, *sorted(p for p in folder.rglob("*") if p.is_dir()))
        stamp = _mtimes(dirs)
        certs = tuple(sorted(p for p in folder.rglob("*.crt") if p.is_file()))
    except OSError:
        return ()
    # kept unless a folder changed in the last second: a change in the same clock tick as
    # the scan would leave its mtime as it was ("racily clean", as git says)
    if stamp is not None and max(stamp) < started - 1_000_000_000:
        _CA_SCANS[folder] = (stamp, certs, dirs)
    return certs


_CA_SCANS: dict[Path, tuple[tuple[int, ...], tuple[Path, ...], tuple[Path, ...]]] = {}
"""`host_ca_certs`' last scan per folder: its folders' mtimes, the certificates, the folders."""


def _mtimes(dirs: tuple[Path, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(os.stat(d).st_mtime_ns for d in dirs)
    except OSError:  # a folder went away: scan again
        return None


def _extra_ca_certs(value: str | None, host_ca_dir: Path) -> tuple[Path, ...]:
    """BENCHFLOW_EXTRA_CA_CERTS: unset -> the host's extra CAs; empty or "none" -> none."""
    if value is None:
        return host_ca_certs(host_ca_dir)
    if value.strip().lower() == "none":
        return ()
    return _paths(value)


def _traces_url(env: Mapping[str, str]) -> str | None:
    if env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        return env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return base.rstrip("/") + "/v1/traces" if base else None


def _config_dir(env: Mapping[str, str]) -> Path:
    if env.get("BENCHFLOW_CONFIG_DIR"):
        return Path(env["BENCHFLOW_CONFIG_DIR"]).expanduser()
    xdg = env.get("XDG_CONFIG_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".config") / "benchflow"


@dataclass(frozen=True)
class Settings:
    """A snapshot of the environment variables benchflow reads."""

    extra_ca_certs: tuple[Path, ...] = ()
    agents_path: tuple[Path, ...] = ()
    cache_dir: Path = field(default_factory=lambda: Path.home() / ".cache" / "benchflow")
    otlp_endpoint: str | None = None
    """Where OpenTelemetry spans go (the standard OTLP variables); None: not configured."""
    registry: str | None = None
    """The default registry.json (path or URL) for `benchflow datasets` and `run NAME@VERSION`."""
    otlp_traces_url: str | None = None
    """The OTLP/HTTP traces URL: the traces endpoint as given, or the endpoint + /v1/traces."""
    otlp_headers: str | None = None
    """The collector's headers as the standard variables give them (`k=v,k2=v2`)."""
    config_dir: Path = field(default_factory=lambda: Path.home() / ".config" / "benchflow")
    """Where `rollout login` writes its config file."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *,
                 host_ca_dir: Path = HOST_CA_DIR) -> Settings:
        env = os.environ if environ is None else environ
        cache = env.get("BENCHFLOW_CACHE_DIR")
        return cls(
            extra_ca_certs=_extra_ca_certs(env.get("BENCHFLOW_EXTRA_CA_CERTS"), host_ca_dir),
            agents_path=agents_path(env),
            cache_dir=Path(cache).expanduser() if cache else Path.home() / ".cache" / "benchflow",
            otlp_endpoint=(env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                           or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None),
            registry=env.get("BENCHFLOW_REGISTRY") or None,
            otlp_traces_url=_traces_url(env),
            otlp_headers=(env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
                          or env.get("OTEL_EXPORTER_OTLP_HEADERS") or None),
            config_dir=_config_dir(env),
        )


_ENV_NAMES = ("BENCHFLOW_EXTRA_CA_CERTS", "BENCHFLOW_AGENTS_PATH", "BENCHFLOW_CACHE_DIR",
              "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
              "BENCHFLOW_REGISTRY", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
              "OTEL_EXPORTER_OTLP_HEADERS", "BENCHFLOW_CONFIG_DIR", "XDG_CONFIG_HOME", "HOME")
"""Every variable `Settings.from_env` reads (HOME: `~` and the default folders)."""
_last: tuple[tuple[str | None, ...], tuple[Path, ...], Settings, Mapping[str, str]] | None = None
"""The variables `get_settings` last read, the host's CAs, the settings, the environment."""


def get_settings() -> Settings:
    """Read the current environment (cheap; call where needed rather than caching globally):
    the same `Settings` again while the variables and the host's CA certificates stay as
    they were (every rollout asks, several times)."""
    global _last
    env = host_environ_view()
    key = _last[0] if _last is not None and _last[3] is env else (
        tuple(env.get(name) for name in _ENV_NAMES))
    host_cas = host_ca_certs() if key[0] is None else ()
    if _last is not None and _last[0] == key and _last[1] == host_cas:
        if _last[3] is not env:
            _last = (*_last[:3], env)
        return _last[2]
    settings = Settings.from_env()
    _last = (key, host_cas, settings, env)
    return settings


def agents_path(environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """`BENCHFLOW_AGENTS_PATH`'s folders (`Settings.agents_path`), read alone: without
    `get_settings`' look at the host's CA folder, for the agent catalog, which is read for
    each role of every rollout (that look is a system call on the event loop's thread)."""
    env = host_environ_view() if environ is None else environ
    return _paths(env.get("BENCHFLOW_AGENTS_PATH"))


_SECRETS: dict[str, str] = {}
"""Keys given as literal values (the QA API's `api_key: "sk-..."`), by a made-up name."""


def define_secret(value: str, prefix: str = "BENCHFLOW_LITERAL_KEY") -> str:
    """A variable name under which `host_env` answers `value` (never put in os.environ):
    configs then carry the name, never the key."""
    import hashlib

    name = f"{prefix}_{hashlib.sha256(value.encode()).hexdigest()[:12].upper()}"
    _SECRETS[name] = value
    return name


def host_env(name: str) -> str | None:
    """One host environment variable (for `${VAR}` expansion and agent credentials), or a
    secret given in code (`define_secret`)."""
    return _SECRETS.get(name) or os.environ.get(name)


def host_environ() -> dict[str, str]:
    """A copy of the host environment (for subprocesses benchflow starts on the host)."""
    return dict(os.environ)


_environ_seen: tuple[dict[Any, Any], Mapping[str, str]] | None = None


def host_environ_view() -> Mapping[str, str]:
    """The host environment, read-only: the same object while the environment is unchanged
    (compared with a copy of `os.environ`'s own table, not decoded variable by variable:
    every rollout asks, several times)."""
    global _environ_seen
    data = getattr(os.environ, "_data", None)  # CPython's encoded table
    if not isinstance(data, dict):
        return MappingProxyType(dict(os.environ))
    if _environ_seen is None or _environ_seen[0] != data:
        _environ_seen = (dict(data), MappingProxyType(dict(os.environ)))
    return _environ_seen[1]
