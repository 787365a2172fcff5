"""The network side of one rollout: its policy, the model-only network, the model endpoint.

```python
net = RolloutNetwork(config, allow_internet=..., job_name=..., log_dir=paths.root / "model_server")
await net.open()                    # model-only network + scripted server / relay, if any
scenes = net.scenes(config.scenes)  # opencode-style models re-homed to the endpoint
spec = SandboxSpec(..., **net.sandbox_fields(online_install=...))
...                                 # start, install the agents
await net.isolate(sandbox)          # before the first agent step (if it started public)
...
await net.aclose()                  # stop the endpoint, release the network
```

The policy: `--network` (`RolloutConfig.network`) when given; else a scripted model server
implies `model-only`; else the task's `sandbox.allow_internet` (false: `none`, or
`model-only` when a real model endpoint or the ACP agents' tool server is configured);
else `public`. Other host services the sandbox calls (the tool server of `acp_tools`)
listen on the same gateway (`service_host()`), their ports allowed like the endpoint's.

The endpoint: a scripted `ModelServer` (its `requests.jsonl` in `log_dir`), or a real
endpoint's root URL relayed through a `ModelRelay` on the sandbox network's gateway
(`capture_model_calls`: every call, scrubbed, in the rollout's `model_calls.jsonl`).
The agents get it as one typed value, `net.agent_endpoint` (`AgentEndpoint`: the URL,
no `/v1`, and each role's key), which each agent's manifest maps to its own settings
(`[env_mapping]`, and the `base_url` launch template variable); what runs in the sandbox
finds it as `BENCHFLOW_PROVIDER_BASE_URL` / `_API_KEY`. Agents whose model ids name a
provider (opencode) get the model `benchflow/<id>`.

The key is the role's own (`ModelTraffic.token_for`): the server and the relay attribute
each call to the role whose key it carries, count its tokens per role and turn, and script
answers may target a role. The relay swaps the role key for the real endpoint's key, so
the real key never enters a sandbox. Only backends that call the endpoint directly (an
egress allowlist: no relay on the host) hand the real key to the sandbox.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio.to_thread
from pydantic import ValidationError

from benchflow.agents.agent_env import PROVIDER_API_KEY_ENV, AgentEndpoint
from benchflow.agents.base import AgentDriver, driver_capabilities
from benchflow.config import ModelEndpoint, Role, RolloutConfig, Scene
from benchflow.errors import ConfigError
from benchflow.rollout.roles import role_identities
from benchflow.rollout.secrets import Scrubber
from benchflow.sandbox import network as netpolicy
from benchflow.sandbox.base import PolicySandbox, Sandbox
from benchflow.sandbox.registry import provider_class
from benchflow.sandbox.spec import NetworkPolicy
from benchflow.settings import host_env
from benchflow.trajectory.writer import TrajectoryWriter

if TYPE_CHECKING:  # the model server (starlette, uvicorn) loads only when an endpoint is used
    from benchflow.model_server import ModelServer
    from benchflow.model_server.capture import ModelCallLog
    from benchflow.model_server.relay import ModelRelay
    from benchflow.model_server.traffic import ModelTraffic

log = logging.getLogger(__name__)

SCRIPTED_API_KEY = "benchflow-scripted"
"""The API key agents send to a scripted model server (it checks none)."""
NO_API_KEY = "benchflow-no-key"
ENDPOINT_PROVIDER = "benchflow"
"""The provider name of the endpoint, for agents whose model ids carry one (opencode)."""
"""Sent when a real endpoint is configured without a key (e.g. a local vLLM)."""
_PLACEHOLDER_URL = "http://model-endpoint.invalid"


def resolve_policy(requested: NetworkPolicy | None, allow_internet: bool,
                   endpoint: ModelEndpoint | None, *, tool_server: bool = False
                   ) -> NetworkPolicy:
    """The rollout's network policy (see the module docstring); `tool_server`: the
    sandbox calls a tool server on the host (`RolloutConfig.acp_tools`).

    Raises:
        ConfigError: `none` was asked for together with a model endpoint or tool server.
    """
    if requested == "none" and (endpoint is not None or tool_server):
        what = "the model endpoint" if endpoint is not None else "the tool server"
        raise ConfigError(f"--network none leaves the sandbox no way to reach {what}; use "
                          "--network model-only")
    if requested is not None:
        return requested
    if endpoint is not None and endpoint.script is not None:
        return "model-only"
    if not allow_internet:
        return "model-only" if endpoint is not None or tool_server else "none"
    return "public"


def endpoint_root(url: str) -> str:
    """A model endpoint's root: no trailing `/` nor `/v1` (agents add their API's prefix)."""
    return url.rstrip("/").removesuffix("/v1")


def endpoint_api_key(endpoint: ModelEndpoint) -> str:
    """The key agents send: the scripted one, the endpoint's own `api_key`, the host variable
    named by `api_key_env`, the host's `BENCHFLOW_PROVIDER_API_KEY`, or a placeholder.

    Raises:
        ConfigError: `api_key_env` names a variable that is not set.
    """
    if endpoint.script is not None:
        return SCRIPTED_API_KEY
    if endpoint.api_key is not None:
        return endpoint.api_key.get_secret_value()
    if endpoint.api_key_env:
        value = host_env(endpoint.api_key_env)
        if not value:
            raise ConfigError(f"--model-api-key-env {endpoint.api_key_env}: the variable is "
                              "not set in the environment")
        return value
    return host_env(PROVIDER_API_KEY_ENV) or NO_API_KEY


def model_endpoint(script: Path | None = None, base_url: str | None = None,
                   api_key_env: str | None = None) -> ModelEndpoint | None:
    """The endpoint that `--model-server` / `--model-base-url` / `--model-api-key-env` ask
    for (None: none), checked before anything starts: the script loads, the key is set.

    Raises:
        ConfigError: both or neither source with a key variable, a bad script or URL, an
            unset key variable.
    """
    if script is None and base_url is None:
        if api_key_env:
            raise ConfigError("--model-api-key-env needs --model-base-url")
        return None
    try:
        endpoint = ModelEndpoint(script=script.expanduser().resolve() if script else None,
                                 base_url=base_url, api_key_env=api_key_env)
    except ValidationError as exc:
        problems = "; ".join(err["msg"] for err in exc.errors())
        raise ConfigError(f"model endpoint: {problems}") from exc
    if endpoint.script is not None:
        from benchflow.model_server import load_script

        load_script(endpoint.script)
    endpoint_api_key(endpoint)
    return endpoint


def for_endpoint(scenes: Iterable[Scene]) -> list[Scene]:
    """`scenes` as they run against a model endpoint: agents that pick a provider by the
    model id's prefix (`provider/model` manifests, e.g. opencode) get the model
    `benchflow/<id>`, the endpoint's provider."""
    from benchflow.agents.catalog import load_catalog  # with an endpoint only

    catalog = load_catalog()

    def point(role: Role) -> Role:
        name = catalog.resolve(role.agent)
        manifest = catalog.manifests.get(name) if name else None
        if manifest is not None and manifest.model.format == "provider/model":
            model = role.model or manifest.model.default
            if model:
                return role.model_copy(update={
                    "model": f"{ENDPOINT_PROVIDER}/{model.split('/', 1)[-1]}"})
        return role

    return [scene.model_copy(update={"roles": [point(role) for role in scene.roles]})
            for scene in scenes]


def check_endpoint(config: RolloutConfig) -> AgentEndpoint | None:
    """The endpoint as the credentials check must see it before any endpoint runs: with
    the endpoint's key (a placeholder URL), so that no agent asks for its own key.

    Raises:
        ConfigError: `api_key_env` names a variable that is not set.
    """
    if config.model_endpoint is None:
        return None
    return AgentEndpoint(_PLACEHOLDER_URL, endpoint_api_key(config.model_endpoint))


def scenes_for_check(config: RolloutConfig) -> list[Scene]:
    """The scenes as the credentials check sees them (with `check_endpoint(config)`)."""
    if config.model_endpoint is None:
        return list(config.scenes)
    return for_endpoint(config.scenes)


def capture_log(config: RolloutConfig, path: Path | None) -> ModelCallLog | None:
    """The rollout's `model_calls.jsonl` log when calls are captured, else None.

    Raises:
        ConfigError: capture without a model endpoint (or without a path); token options
            (`request_tokens`) without capture.
    """
    endpoint = config.model_endpoint
    if not config.capture_model_calls:
        if endpoint is not None and endpoint.request_tokens:
            raise ConfigError("request_tokens (--capture-tokens) asks the endpoint for token "
                              "ids that only a capture records: also turn on "
                              "capture_model_calls (--capture-model-calls)")
        return None
    if endpoint is None:
        raise ConfigError("capture_model_calls (--capture-model-calls) records the calls that "
                          "pass through benchflow's model server or relay: also give a model "
                          "endpoint (--model-server SCRIPT or --model-base-url URL)")
    if path is None:
        raise ConfigError("capture_model_calls needs the rollout's model_calls.jsonl path")
    from benchflow.model_server.capture import ModelCallLog

    return ModelCallLog(path, Scrubber())


def _on_loopback(url: str) -> bool:
    """Whether `url` names this host's loopback, which no sandbox reaches directly."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def needs_network_install(drivers: Iterable[AgentDriver]) -> bool:
    """Whether installing these agents downloads anything in the sandbox: registered
    agents with a package (npm), and agents benchflow cannot see into (command agents)."""
    return any(driver_capabilities(d).network_install for d in drivers)


class RolloutNetwork:
    """One rollout's network policy and model endpoint, from `open()` to `aclose()`."""

    def __init__(self, config: RolloutConfig, *, allow_internet: bool, job_name: str,
                 log_dir: Path, capture_path: Path | None = None,
                 verifier_scenes: Sequence[Scene] = ()) -> None:
        self.endpoint = config.model_endpoint
        self.capture: ModelCallLog | None = capture_log(config, capture_path)
        self.tool_server = config.acp_tools is not None
        self.policy = resolve_policy(config.network, allow_internet, self.endpoint,
                                     tool_server=self.tool_server)
        self.backend = config.environment
        # model-only as an outbound allowlist: the sandbox calls the endpoint itself
        self.direct = provider_class(config.environment).capabilities.egress_allowlist
        self.allowlist: tuple[str, ...] = ()
        self.base_network: str | None = config.provider_config.get("network")
        self.job_name = job_name
        self.log_dir = log_dir
        self.network: netpolicy.ModelOnlyNetwork | None = None
        self.agent_endpoint: AgentEndpoint | None = None
        # the verifier's roles (an agent-judge) get keys too: calls need one, and are theirs
        self.identities = role_identities([*config.scenes, *verifier_scenes], self.endpoint)
        self.traffic: ModelTraffic | None = None
        """Per-role keys and counts, when benchflow's server or relay serves the endpoint."""
        self.url: str | None = None
        self._server: ModelServer | ModelRelay | None = None
        self._port: int | None = None
        self._service_ports: list[int] = []
        self._start_policy: NetworkPolicy = self.policy

    async def open(self) -> None:
        """Create the model-only network and start the endpoint (when there is one).

        Raises:
            ConfigError: the policy needs a host firewall; the key's
                variable is unset; the endpoint cannot listen.
            SandboxStartError: docker or iptables failed.
        """
        if self.policy != "public" and self.base_network:
            raise ConfigError(f"provider_config network {self.base_network!r} conflicts with "
                              f"network policy {self.policy!r}")
        if self.direct:
            if self.tool_server:
                raise ConfigError(f"tools for ACP agents: on the {self.backend} backend the "
                                  "sandbox cannot reach a tool server on this host; use "
                                  "--env docker")
            self._open_direct()
            return
        if self.policy == "model-only":
            self.network = await netpolicy.acquire_model_only_network(self.job_name)
        if self.endpoint is None:
            return
        key = endpoint_api_key(self.endpoint)
        from benchflow.model_server.traffic import ModelTraffic

        # the relay also accepts the placeholder key host-side callers send without one
        self.traffic = traffic = ModelTraffic(self.identities, upstream_key=key,
                                              host_keys=(NO_API_KEY,))
        host = (self.network.gateway if self.network is not None
                else await netpolicy.network_gateway(self.base_network))
        if self.endpoint.script is not None:
            from benchflow.model_server import ModelServer

            self._server = ModelServer(self.endpoint.script, host=host, log_dir=self.log_dir,
                                       capture=self.capture, traffic=traffic)
        else:  # always relayed: role keys, per-role counts, the real key kept on the host
            assert self.endpoint.base_url is not None
            from benchflow.model_server.relay import ModelRelay

            self._server = ModelRelay(endpoint_root(self.endpoint.base_url), host=host,
                                      log_dir=self.log_dir, capture=self.capture,
                                      request_tokens=self.endpoint.request_tokens,
                                      traffic=traffic)
        self.url = self._server.start()
        self._port = self._server.port
        if self.network is not None:
            await netpolicy.allow_endpoint(self.network, self._port)
        # no shared key: each role gets its own; the real one stays on the host
        self.agent_endpoint = AgentEndpoint(self.url, role_keys=self.role_keys)
        log.info("model endpoint for the agents: %s (network %s)", self.url, self.policy)

    def _open_direct(self) -> None:
        """The endpoint as the sandbox calls it itself (no server, relay or network on the
        host); under `model-only` its host is the sandbox's one allowed destination.

        Raises:
            ConfigError: the endpoint is one only the host reaches (a scripted server, the
                host's loopback) or calls are to be captured (that needs the relay).
        """
        if self.endpoint is None:
            return
        where = (f"on the {self.backend} backend the sandbox calls the model endpoint "
                 "directly (model-only is an outbound allowlist holding its host)")
        if self.endpoint.script is not None:
            raise ConfigError(f"--model-server: {where}, so benchflow's scripted model server "
                              "on this host cannot serve it: use --env docker, or give "
                              "--model-base-url with an address the sandbox reaches")
        assert self.endpoint.base_url is not None
        if _on_loopback(self.endpoint.base_url):
            raise ConfigError(f"--model-base-url {self.endpoint.base_url}: {where}, and this "
                              "address is the host's loopback: give an address the sandbox "
                              "reaches, or use --env docker")
        if self.capture is not None:
            raise ConfigError(f"capture_model_calls: {where}, so no call passes through "
                              "benchflow's relay: use --env docker to capture calls")
        self.url = endpoint_root(self.endpoint.base_url)
        host = urlsplit(self.url).hostname
        self.allowlist = (host,) if host else ()
        self.agent_endpoint = AgentEndpoint(self.url, endpoint_api_key(self.endpoint))
        log.info("model endpoint for the agents: %s (network %s, called directly)", self.url,
                 self.policy)

    async def service_host(self) -> str:
        """The host address where a service the sandbox calls must listen (the sandbox
        network's gateway, as for the model endpoint).

        Raises:
            ConfigError: the sandbox reaches no host address (`none`, a direct backend).
            SandboxStartError: docker has no such network.
        """
        if self.direct or self.policy == "none":
            raise ConfigError(f"the sandbox cannot reach this host (network {self.policy}, "
                              f"{self.backend} backend)")
        if self.network is not None:
            return self.network.gateway
        return await netpolicy.network_gateway(self.base_network)

    async def allow_port(self, port: int) -> None:
        """Let the sandbox reach `service_host():port` (under `model-only`; revoked by
        `aclose()`)."""
        if self.network is not None:
            await netpolicy.allow_endpoint(self.network, port)
            self._service_ports.append(port)

    def attribute_calls(self, trajectory: TrajectoryWriter) -> None:
        """A call made with a role's key belongs to that role's current (or last) prompt."""
        if self.traffic is not None:
            self.traffic.place_of = trajectory.place_of
        if self.capture is not None:
            self.capture.place = lambda: trajectory.place

    @property
    def role_keys(self) -> dict[str, str]:
        """Each role's key for the endpoint ({} when no server or relay serves it)."""
        if self.traffic is None:
            return {}
        return {role: self.traffic.token_for(role) for role in self.traffic.roles}

    def host_endpoint(self) -> ModelEndpoint | None:
        """The endpoint as benchflow itself calls it from the host (the model agent), or None."""
        if self.url is None or self.endpoint is None:
            return None
        return ModelEndpoint(base_url=self.url, model=self.endpoint.model,
                             api_key_env=self.endpoint.api_key_env, api_key=self.endpoint.api_key)

    def scenes(self, scenes: Iterable[Scene]) -> list[Scene]:
        """`scenes` as they run against this rollout's endpoint (`for_endpoint`)."""
        return for_endpoint(scenes) if self.agent_endpoint is not None else list(scenes)

    def sandbox_fields(self, *, online_install: bool) -> dict[str, Any]:
        """`SandboxSpec` fields: the policy itself, or `public` while an install needs the
        network (then `isolate()` applies the policy before the agent runs)."""
        if self.policy == "public":
            return {}
        fields: dict[str, Any] = {"egress_allowlist": self.allowlist} if self.allowlist else {}
        fields["isolate_services"] = True  # a multi-container task's other services too
        self._start_policy = "public" if online_install else self.policy
        if self._start_policy == "public":
            log.info("installing the agents needs the network: the sandbox starts public and "
                     "is isolated (%s) before the agent runs", self.policy)
            return fields
        name = self.network.name if self.network is not None else None
        return {**fields, "network_policy": self.policy, "network": name}

    async def isolate(self, sandbox: Sandbox) -> None:
        """Apply the policy to a sandbox that started public for its install (else a no-op).

        Raises:
            SandboxStartError: docker refused.
        """
        if self._start_policy != "public" or self.policy == "public":
            return
        if not isinstance(sandbox, PolicySandbox):
            raise ConfigError(f"network policy {self.policy!r}: the {sandbox.backend} backend "
                              "cannot change a running sandbox's network")
        await netpolicy.isolate(sandbox, self.policy, self.network)
        self._start_policy = self.policy

    async def aclose(self) -> None:
        """Stop the endpoint, revoke its firewall rule, release the network. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            await anyio.to_thread.run_sync(server.stop)
        network, self.network = self.network, None
        if network is not None:
            for port in [self._port, *self._service_ports]:
                if port is not None:
                    await netpolicy.revoke_endpoint(network, port)
            self._service_ports = []
            await netpolicy.release_model_only_network(network)


__all__ = [
    "ENDPOINT_PROVIDER",
    "NO_API_KEY",
    "SCRIPTED_API_KEY",
    "RolloutNetwork",
    "capture_log",
    "check_endpoint",
    "endpoint_api_key",
    "endpoint_root",
    "for_endpoint",
    "model_endpoint",
    "needs_network_install",
    "resolve_policy",
    "scenes_for_check",
]
