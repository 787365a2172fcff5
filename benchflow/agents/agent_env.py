"""What an ACP agent is started with: model id, credentials, environment and argv.

Pure functions over an `AgentManifest` (host values come only through
`benchflow.settings.host_env`), so the choices are testable without a sandbox.

Precedence of the agent's environment, lowest first: `BENCHFLOW_ROLE`, `HOME`, `USER`,
`PYTHONPATH` (python agents); the rollout's env (`ROLLOUT_TASK_INSTRUCTION`); the manifest's
`launch.env`; the `env_mapping` targets (model; base URL and API key from
`BENCHFLOW_PROVIDER_BASE_URL` / `BENCHFLOW_PROVIDER_API_KEY`: the role's env, else the
rollout's `AgentEndpoint`, else the host's); host variables named in `passthrough_env`; the
endpoint's `BENCHFLOW_PROVIDER_*` under the role's `env`. Credentials (the values of the credentials option
that is met) travel separately: they also choose the ACP auth method.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchflow.agents.templates import render_string
from benchflow.errors import ConfigError
from benchflow.settings import host_env

if TYPE_CHECKING:  # the manifests load with the catalog, for registered agents only
    from benchflow.agents.manifest import AgentManifest, CredentialOption

PROVIDER_API_KEY_ENV = "BENCHFLOW_PROVIDER_API_KEY"
PROVIDER_BASE_URL_ENV = "BENCHFLOW_PROVIDER_BASE_URL"
"""benchflow's provider settings (role env, else the endpoint, else host env), mapped to each
agent's own names; processes in the sandbox also find them under these names."""


@dataclass(frozen=True)
class AgentEndpoint:
    """The model endpoint as agents in the sandbox call it (`rollout/model_endpoint.py`): its
    root URL (no /v1) and the key sent: each role's own for benchflow's model server or
    relay (`role_keys`), or the real key when the sandbox calls the endpoint directly."""

    base_url: str
    api_key: str | None = field(default=None, repr=False)
    role_keys: Mapping[str, str] = field(default_factory=dict, repr=False)

    def for_role(self, role: str) -> AgentEndpoint:
        """The endpoint as the agent playing `role` calls it (with that role's key)."""
        return AgentEndpoint(self.base_url, self.role_keys.get(role) or self.api_key)

    def sandbox_env(self) -> dict[str, str]:
        """`BENCHFLOW_PROVIDER_BASE_URL` / `_API_KEY`, for what runs in the sandbox."""
        key = {PROVIDER_API_KEY_ENV: self.api_key} if self.api_key else {}
        return {PROVIDER_BASE_URL_ENV: self.base_url, **key}


def _with_endpoint(role_env: Mapping[str, str] | None,
                   endpoint: AgentEndpoint | None) -> dict[str, str]:
    """The role's env over the endpoint's provider settings (the role's own values win)."""
    return {**(endpoint.sandbox_env() if endpoint else {}), **(role_env or {})}


def format_model(manifest: AgentManifest, model: str | None) -> str | None:
    """The id the agent expects for `model` (None: the manifest's default, maybe None).

    `bare` drops a `provider/` prefix (`anthropic/claude-x` -> `claude-x`); `provider/model`
    adds the manifest's provider to bare ids; `as_is` keeps the id.
    """
    model = model or manifest.model.default
    if model is None:
        return None
    spec = manifest.model
    if spec.format == "bare" and "/" in model:
        return model.split("/", 1)[1]
    if spec.format == "provider/model" and "/" not in model and spec.provider:
        return f"{spec.provider}/{model}"
    return model


def model_provider(manifest: AgentManifest, model: str | None) -> str | None:
    """The provider a model id names (`openai/gpt-5` -> `openai`), else the manifest's."""
    model = model or manifest.model.default
    if model and "/" in model and not manifest.model.upload_file:
        return model.split("/", 1)[0]
    return manifest.model.provider


@dataclass(frozen=True)
class Credentials:
    """The credentials option that is met: its values (secret), files and auth method."""

    env: dict[str, str] = field(default_factory=dict, repr=False)
    files: list[tuple[Path, str]] = field(default_factory=list)
    auth_method: str | None = None


def _value(name: str, overrides: Mapping[str, str]) -> str | None:
    return overrides.get(name) or host_env(name) or None


def provider_env(manifest: AgentManifest, overrides: Mapping[str, str]) -> dict[str, str]:
    """benchflow's provider API key and base URL under the agent's own variable names."""
    out: dict[str, str] = {}
    mapping = manifest.env_mapping
    for ours, theirs in ((PROVIDER_API_KEY_ENV, mapping.api_key),
                         (PROVIDER_BASE_URL_ENV, mapping.base_url)):
        value = _value(ours, overrides)
        if theirs and value:
            out[theirs] = value
    return out


def applicable_options(manifest: AgentManifest, model: str | None) -> list[CredentialOption]:
    """The credentials options that apply to `model` (those for its provider, or for any)."""
    provider = model_provider(manifest, model)
    return [o for o in manifest.credentials if o.provider is None or o.provider == provider]


def resolve_credentials(manifest: AgentManifest, model: str | None,
                        overrides: Mapping[str, str] | None = None,
                        endpoint: AgentEndpoint | None = None) -> Credentials:
    """The first applicable credentials option that is met, from `overrides` (the role's
    env), benchflow's provider key (the role's, the endpoint's), or the host environment.

    Raises:
        ConfigError: options apply and none is met; the message names the variables.
    """
    overrides = _with_endpoint(overrides, endpoint)
    provided = provider_env(manifest, overrides)
    options = applicable_options(manifest, model)
    if not options:
        return Credentials(auth_method=manifest.launch.auth_method)
    for option in options:
        values = {n: v for n in option.env if (v := provided.get(n) or _value(n, overrides))}
        files = [(Path(f.host).expanduser(), f.sandbox) for f in option.files]
        if len(values) == len(option.env) and all(host.is_file() for host, _ in files):
            return Credentials(values, files, option.auth_method or manifest.launch.auth_method)
    raise ConfigError(missing_credentials_message(manifest, model, options))


def missing_credentials_message(manifest: AgentManifest, model: str | None,
                                options: list[CredentialOption]) -> str:
    ways = []
    for option in options:
        parts = [*option.env, *(f"the file {f.host}" for f in option.files)]
        ways.append(" and ".join(parts))
    shown = format_model(manifest, model)
    about = f"agent {manifest.name!r}" + (f" with model {shown!r}" if shown else "")
    message = (f"{about} needs credentials: set {' or '.join(ways)} in the environment "
               "(export it on the host, or put it in the role's env)")
    if manifest.env_mapping.api_key:
        message += (f"; {PROVIDER_API_KEY_ENV} is also accepted "
                    f"(passed to the agent as {manifest.env_mapping.api_key})")
    return message


@dataclass(frozen=True)
class LaunchPlan:
    """How one session's agent starts: argv, environment, credentials, ACP model and auth."""

    argv: list[str]
    env: dict[str, str] = field(repr=False)
    credentials: Credentials
    acp_model: str | None
    auth_method: str | None


def launch_plan(manifest: AgentManifest, *, model: str | None, role: str,
                role_env: Mapping[str, str], base_env: Mapping[str, str], user: str,
                home: str, workdir: str, python_path: str | None = None,
                credentials: Credentials | None = None,
                endpoint: AgentEndpoint | None = None) -> LaunchPlan:
    """Everything `AcpSession.open()` needs for `manifest`, with `model` already in the
    agent's format (and, for `upload_file` agents, already the sandbox path).

    Raises:
        ConfigError: credentials are missing, or a launch template is broken.
    """
    role_env = _with_endpoint(role_env, endpoint)  # the role's endpoint (`for_role`)
    creds = credentials or resolve_credentials(manifest, model, role_env)
    # base_url: benchflow's provider base URL (no /v1), for agents configured by a template
    # rather than an env var (codex's -c overrides, opencode's inline config); "" when unset.
    context = {"model": model, "agent_dir": manifest.sandbox_dir, "home": home, "user": user,
               "role": role, "workdir": workdir, "name": manifest.name,
               "version": manifest.version,
               "base_url": _value(PROVIDER_BASE_URL_ENV, role_env) or ""}
    where = f"{manifest.folder or manifest.name}/agent.toml"
    argv = [render_string(arg, context, where=f"{where}: launch.argv[{i}]")
            for i, arg in enumerate(manifest.launch.argv)]
    env: dict[str, str] = {"BENCHFLOW_ROLE": role, "HOME": home, "USER": user}
    if python_path:
        env["PYTHONPATH"] = python_path
    env.update(base_env)
    for name, template in manifest.launch.env.items():
        value = render_string(template, context, where=f"{where}: launch.env.{name}")
        if value:
            env[name] = value
    if model and manifest.env_mapping.model and manifest.model.select in ("env", "both"):
        env[manifest.env_mapping.model] = model
    env.update(provider_env(manifest, role_env))
    for name in manifest.passthrough_env:
        value = host_env(name)
        if value:
            env[name] = value
    env.update(role_env)
    for name in creds.env:
        env.pop(name, None)  # credentials travel separately
    acp_model = model if manifest.model.select in ("acp", "both") else None
    return LaunchPlan(argv, env, creds, acp_model, creds.auth_method)


__all__ = [
    "AgentEndpoint",
    "PROVIDER_API_KEY_ENV",
    "PROVIDER_BASE_URL_ENV",
    "Credentials",
    "LaunchPlan",
    "applicable_options",
    "format_model",
    "launch_plan",
    "model_provider",
    "provider_env",
    "resolve_credentials",
]
