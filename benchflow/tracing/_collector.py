"""Where the SDK sends spans: the collector's URL, its headers, and a health check.

Light on purpose (no OpenTelemetry import): `Rollout.endpoint` and `Rollout.check()` use it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from benchflow.settings import get_settings

DEFAULT_ENDPOINT = "http://localhost:4318"
"""The standard OTLP/HTTP port; benchflow's trace listener's default address."""


@dataclass(frozen=True)
class CheckResult:
    """What `Rollout.check()` found: `ok`, and one line saying why (truthy when ok)."""

    ok: bool
    message: str
    endpoint: str | None = None

    def __bool__(self) -> bool:
        return self.ok


def traces_url(endpoint: str | None) -> str:
    """The OTLP/HTTP traces URL: `endpoint` (+ `/v1/traces` unless it ends so), else the
    standard OTEL variables, else `DEFAULT_ENDPOINT`."""
    if endpoint is None:
        configured = get_settings().otlp_traces_url
        if configured:
            return configured
        endpoint = DEFAULT_ENDPOINT
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def parse_headers(text: str | None) -> dict[str, str]:
    """`k=v,k2=v2` (values URL-encoded), as the OTEL_EXPORTER_OTLP_HEADERS variable has it."""
    headers: dict[str, str] = {}
    for item in (text or "").split(","):
        name, sep, value = item.partition("=")
        if sep and name.strip():
            headers[urllib.parse.unquote(name.strip())] = urllib.parse.unquote(value.strip())
    return headers


def collector_headers(api_key: str | None, headers: Mapping[str, str] | None) -> dict[str, str]:
    """Headers for the collector: the given ones (else the standard variable's), plus
    `Authorization: Bearer <api_key>` when an api key is set."""
    found = dict(headers) if headers is not None else parse_headers(get_settings().otlp_headers)
    if api_key:
        found["Authorization"] = f"Bearer {api_key}"
    return found


def check_endpoint(url: str, headers: Mapping[str, str], timeout_sec: float) -> CheckResult:
    """Send an empty OTLP export (a valid request with no spans) and read the answer."""
    import httpx

    try:
        response = httpx.post(url, content=b"", timeout=timeout_sec, headers={
            **headers, "Content-Type": "application/x-protobuf"})
    except httpx.HTTPError as exc:
        return CheckResult(False, f"collector {url}: not reachable ({type(exc).__name__})", url)
    if response.status_code in (401, 403):
        return CheckResult(False, f"collector {url}: credentials rejected (HTTP "
                                  f"{response.status_code}): check api_key / headers", url)
    if not response.is_success:
        return CheckResult(False, f"collector {url}: answered HTTP {response.status_code}", url)
    return CheckResult(True, f"collector {url}: accepting spans", url)


__all__ = ["DEFAULT_ENDPOINT", "check_endpoint", "collector_headers", "parse_headers",
           "traces_url"]
