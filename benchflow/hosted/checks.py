"""`rollout check`: can a hosted-benchmark run start? One line per check.

| check | passes when |
|---|---|
| docker | the Docker daemon answers (the sandbox backend's preflight) |
| registry | the registry (login's, `--registry`, `BENCHFLOW_REGISTRY` or the shipped one) loads |
| credentials | a token is stored or its variable is set, and the endpoint does not refuse it |
| endpoint | the agent endpoint answers `GET` (any status but 404 and 5xx) |

The endpoint gets `GET <endpoint>` with the `Authorization` header: an endpoint that
serves `GET` there (the examples do) answers 200 for a good token and 401/403 for a bad
one; a POST-only endpoint answers 405, which passes without checking the token.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchflow.errors import BenchflowError
from benchflow.hosted.login import LoginConfig


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str

    @property
    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name:<12} {self.detail}"


def check_docker() -> Check:
    import anyio

    from benchflow.sandbox.registry import get_provider

    try:
        anyio.run(get_provider("docker").preflight)
    except BenchflowError as exc:
        return Check("docker", False, str(exc).splitlines()[0][:300])
    return Check("docker", True, "the daemon answers")


def check_registry(registry: str | None) -> Check:
    from benchflow.hosted.workspace import default_registry_ref
    from benchflow.job.registry import load_registry

    try:
        loaded = load_registry(default_registry_ref(registry))
    except BenchflowError as exc:
        return Check("registry", False, str(exc))
    return Check("registry", True, f"{loaded.source}: {len(loaded.datasets)} dataset(s)")


def check_endpoint(config: LoginConfig, endpoint: str | None,
                   timeout_sec: float = 10.0) -> list[Check]:
    """The credentials and endpoint lines."""
    import httpx

    token = config.resolved_token()
    if token is None:
        where = f"${config.token_env} is not set" if config.token_env else "no token stored"
        credentials = Check("credentials", False, f"{where}: run `rollout login`")
    else:
        credentials = Check("credentials", True, "token " + (
            f"from ${config.token_env}" if config.token_env else "stored"))
    if endpoint is None:
        return [credentials, Check("endpoint", False, "none configured: `rollout login "
                                   "--endpoint URL` or --agent-endpoint URL")]
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        answer = httpx.get(endpoint, headers=headers, timeout=timeout_sec)
    except httpx.HTTPError as exc:
        return [credentials, Check("endpoint", False, f"{endpoint} is down "
                                   f"({type(exc).__name__})")]
    status = answer.status_code
    if status in (401, 403) and token is not None:
        credentials = Check("credentials", False, f"{endpoint} refused the token "
                            f"(HTTP {status}): run `rollout login` with the right one")
    elif token is not None and status == 405:
        credentials = Check("credentials", True, f"{credentials.detail} (not verified: "
                            "the endpoint does not serve GET)")
    if status == 404 or status >= 500:
        return [credentials, Check("endpoint", False, f"{endpoint} answered HTTP {status}")]
    return [credentials, Check("endpoint", True, f"{endpoint} answers (HTTP {status})")]


def run_checks(config: LoginConfig, *, endpoint: str | None = None,
               registry: str | None = None) -> list[Check]:
    """Every check, in order (each runs whatever the others found)."""
    return [check_docker(), check_registry(registry or config.registry),
            *check_endpoint(config, endpoint or config.endpoint)]


__all__ = ["Check", "check_docker", "check_endpoint", "check_registry", "run_checks"]
