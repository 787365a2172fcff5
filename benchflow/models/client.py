"""A small client for OpenAI-compatible Chat Completions endpoints (vLLM, SGLang, Ollama,
gateways, OpenAI itself), on the official `openai` SDK.

```python
client = ModelClient(ModelEndpoint.remote("http://127.0.0.1:8000/v1", "qwen3", "VLLM_KEY"))
reply = await client.chat([{"role": "user", "content": "2+2?"}])
reply.text, reply.usage.input, client.usage.total_cost
```

Retries are ours (the SDK's own are off): transient failures (timeouts, connection errors,
408/409/429, 5xx) are retried `max_retries` times with exponential backoff; everything
else raises `ProviderError` at once. The API key is read from the host variable the
endpoint names (through `benchflow.settings`) and is never logged.
"""

from __future__ import annotations

import functools
import json
import logging
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

import anyio

from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError, ProviderError
from benchflow.models.errors import map_openai_errors
from benchflow.settings import host_env

log = logging.getLogger(__name__)

NO_API_KEY = "benchflow-no-key"
"""Sent when the endpoint names no key variable (local servers accept anything)."""


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True)
class ToolCallRequest:
    """One tool call the model asked for; `arguments` is {} when they are not a JSON object."""

    id: str
    name: str
    arguments: dict[str, Any]
    raw_arguments: str


@dataclass(frozen=True)
class Usage:
    input: int = 0
    output: int = 0
    cost: float | None = None


@dataclass(frozen=True)
class ChatReply:
    """One completion: its text, tool calls, finish reason and usage."""

    text: str
    tool_calls: tuple[ToolCallRequest, ...]
    finish_reason: str | None
    usage: Usage
    model: str

    def as_message(self) -> dict[str, Any]:
        """The assistant message to append to the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function",
                 "function": {"name": c.name, "arguments": c.raw_arguments}}
                for c in self.tool_calls]
        return message


@dataclass
class UsageTotals:
    """What a client has used so far."""

    calls: int = 0
    retries: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_cost: float | None = None

    def add(self, usage: Usage) -> None:
        self.calls += 1
        self.input_tokens += usage.input
        self.output_tokens += usage.output
        if usage.cost is not None:
            self.total_cost = round((self.total_cost or 0.0) + usage.cost, 12)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS context, built once per process: loading the CA bundle takes
    ~0.1 s and blocks the event loop, once per client otherwise (a client per rollout)."""
    import httpx

    return httpx.create_ssl_context()


def api_base_url(base_url: str) -> str:
    """The SDK's base URL: the endpoint's root plus `/v1` (given with or without it)."""
    root = base_url.rstrip("/")
    return root if root.endswith("/v1") else f"{root}/v1"


def resolve_api_key(endpoint: ModelEndpoint) -> str:
    """The endpoint's own `api_key`, the key from the host variable `endpoint.api_key_env`, or a
    placeholder when none is named.

    Raises:
        ConfigError: the named variable is not set.
    """
    if endpoint.api_key is not None:
        return endpoint.api_key.get_secret_value()
    if not endpoint.api_key_env:
        return NO_API_KEY
    value = host_env(endpoint.api_key_env)
    if not value:
        raise ConfigError(f"the model endpoint's key variable {endpoint.api_key_env} is not set: "
                          f"export {endpoint.api_key_env}=... (or name another with api_key_env)")
    return value


@dataclass
class ModelClient:
    """Calls one endpoint's Chat Completions API with retries, timeouts, usage and cost.

    Args:
        endpoint: a `ModelEndpoint` with `base_url` (and `model`, unless every call names one).
        max_retries: retries of a transient failure (0: try once).
        timeout_sec: deadline of each call.
        backoff_sec: the first retry's delay; doubles each retry, capped at `max_backoff_sec`.
        prices: USD per million tokens by model id; cost is None for models not listed.
        api_key: a key to send instead of the endpoint's (a role's key for benchflow's
            model server or relay).
    """

    endpoint: ModelEndpoint
    max_retries: int = 3
    timeout_sec: float = 120.0
    backoff_sec: float = 1.0
    max_backoff_sec: float = 30.0
    prices: Mapping[str, Price] = field(default_factory=dict)
    usage: UsageTotals = field(default_factory=UsageTotals)
    api_key: str | None = field(default=None, repr=False)
    _sdk: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.endpoint.base_url is None:
            raise ConfigError("the model client needs an endpoint with base_url (a scripted "
                              "model is served by `benchflow model-server` at a URL)")
        if self.max_retries < 0:
            raise ConfigError(f"max_retries must be >= 0 (got {self.max_retries})")

    def _client(self) -> Any:
        if self._sdk is None:
            from benchflow._extras import require

            openai = require("openai", "models", "the model client (model agent, QA API, "
                             "LLM judge)")
            assert self.endpoint.base_url is not None
            self._sdk = openai.AsyncOpenAI(
                base_url=api_base_url(self.endpoint.base_url),
                api_key=self.api_key or resolve_api_key(self.endpoint),
                max_retries=0, timeout=self.timeout_sec,
                http_client=openai.DefaultAsyncHttpxClient(verify=_tls_context()))
        return self._sdk

    def delay_sec(self, retry: int) -> float:
        """The wait before retry number `retry` (1-based)."""
        return min(self.backoff_sec * (2 ** (retry - 1)), self.max_backoff_sec)

    async def chat(self, messages: Sequence[Mapping[str, Any]], *,
                   tools: Sequence[Mapping[str, Any]] | None = None,
                   model: str | None = None, temperature: float | None = None,
                   extra: Mapping[str, Any] | None = None) -> ChatReply:
        """One chat completion, retried on transient failures.

        Raises:
            ConfigError: no model id (neither `model` nor the endpoint's), or an unset key variable.
            ProviderError: the call failed for good (`.status`, `.transient`).
        """
        model_id = model or self.endpoint.model
        if not model_id:
            raise ConfigError("no model id: give the endpoint a `model` (-m MODEL)")
        kwargs: dict[str, Any] = {"model": model_id, "messages": list(messages),
                                  **dict(extra or {})}
        if tools:
            kwargs["tools"] = list(tools)
        if temperature is not None:
            kwargs["temperature"] = temperature
        client = self._client()
        retry = 0
        while True:
            try:
                with map_openai_errors():
                    completion = await client.chat.completions.create(
                        **kwargs, timeout=self.timeout_sec)
                break
            except ProviderError as exc:
                if not exc.transient or retry >= self.max_retries:
                    raise
                retry += 1
                self.usage.retries += 1
                delay = self.delay_sec(retry)
                log.warning("model call to %s failed (%s); retry %d/%d in %.1f s", model_id,
                            exc.status or "no status", retry, self.max_retries, delay)
                await anyio.sleep(delay)
        reply = self._reply(completion, model_id)
        self.usage.add(reply.usage)
        return reply

    def _reply(self, completion: Any, model_id: str) -> ChatReply:
        if not completion.choices:
            raise ProviderError(f"model {model_id} answered with no choices")
        choice = completion.choices[0]
        message = choice.message
        calls = tuple(_tool_call(c) for c in (message.tool_calls or ())
                      if getattr(c, "function", None) is not None)
        raw = completion.usage
        input_tokens = int(getattr(raw, "prompt_tokens", 0) or 0)
        output_tokens = int(getattr(raw, "completion_tokens", 0) or 0)
        price = self.prices.get(model_id)
        usage = Usage(input_tokens, output_tokens,
                      price.cost(input_tokens, output_tokens) if price else None)
        return ChatReply(text=message.content or "", tool_calls=calls,
                         finish_reason=choice.finish_reason, usage=usage, model=model_id)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP connections (idempotent)."""
        if self._sdk is not None:
            await self._sdk.close()
            self._sdk = None


def _tool_call(call: Any) -> ToolCallRequest:
    raw = call.function.arguments or ""
    try:
        args = json.loads(raw) if raw.strip() else {}
    except ValueError:
        args = {}
    return ToolCallRequest(id=call.id, name=call.function.name,
                           arguments=args if isinstance(args, dict) else {}, raw_arguments=raw)


__all__ = ["ChatReply", "ModelClient", "Price", "ToolCallRequest", "Usage", "UsageTotals",
           "api_base_url", "resolve_api_key"]
