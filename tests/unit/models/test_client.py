"""The model client against benchflow's scripted model server (real HTTP, the real openai SDK)."""

from __future__ import annotations

import inspect
import logging

import httpx
import openai
import pytest

from benchflow.config import ModelEndpoint
from benchflow.errors import ConfigError, ProviderError
from benchflow.model_server import ModelServer, parse_script
from benchflow.models import ModelClient, Price, api_base_url
from benchflow.models.errors import map_openai_errors, to_provider_error

pytestmark = pytest.mark.anyio

QA = {"name": "qa", "answers": [{"match": "capital of France", "text": "Paris"},
                                {"regex": r"15\s*\*\s*27", "text": "405"}]}


def _server(**extra: object) -> ModelServer:
    return ModelServer(parse_script({**QA, **extra}))


async def test_answer_chosen_by_question_with_usage_and_cost() -> None:
    with _server() as server:
        async with ModelClient(ModelEndpoint.remote(server.url, "scripted-qa"),
                               prices={"scripted-qa": Price(1.0, 2.0)}) as client:
            reply = await client.chat([{"role": "user",
                                         "content": "What is the capital of France?"}])
            other = await client.chat([{"role": "user", "content": "Calculate 15 * 27"}])
    assert reply.text == "Paris"
    assert other.text == "405"
    assert reply.usage.input > 0 and reply.usage.output > 0
    assert reply.usage.cost == pytest.approx((reply.usage.input + 2 * reply.usage.output) / 1e6)
    assert client.usage.calls == 2
    assert client.usage.input_tokens == reply.usage.input + other.usage.input


@pytest.mark.parametrize("status", [429, 500])
async def test_transient_failures_are_retried(status: int) -> None:
    with _server(faults=[{"status": status, "times": 2}]) as server:
        async with ModelClient(ModelEndpoint.remote(server.url, "m"), backoff_sec=0.01) as client:
            reply = await client.chat([{"role": "user", "content": "capital of France"}])
        statuses = [r["status"] for r in server.requests]
    assert reply.text == "Paris"
    assert statuses == [status, status, 200]
    assert client.usage.retries == 2


async def test_retries_run_out_and_raise_transient_provider_error() -> None:
    with _server(faults=[{"status": 503, "times": 5}]) as server:
        async with ModelClient(ModelEndpoint.remote(server.url, "m"), max_retries=1,
                               backoff_sec=0.01) as client:
            with pytest.raises(ProviderError) as info:
                await client.chat([{"role": "user", "content": "capital of France"}])
        assert len(server.requests) == 2
    assert info.value.status == 503 and info.value.transient and info.value.retryable


async def test_client_errors_are_not_retried() -> None:
    with _server(faults=[{"status": 401, "times": 1}]) as server:
        async with ModelClient(ModelEndpoint.remote(server.url, "m"),
                               backoff_sec=0.01) as client:
            with pytest.raises(ProviderError) as info:
                await client.chat([{"role": "user", "content": "capital of France"}])
        assert len(server.requests) == 1
    assert info.value.status == 401 and not info.value.retryable


async def test_timeout_is_transient_and_bounded() -> None:
    # nothing answers on this socket: bind, never accept
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    port = sock.getsockname()[1]
    try:
        async with ModelClient(ModelEndpoint.remote(f"http://127.0.0.1:{port}", "m"),
                               max_retries=1, timeout_sec=0.3, backoff_sec=0.01) as client:
            with pytest.raises(ProviderError) as info:
                await client.chat([{"role": "user", "content": "hi"}])
    finally:
        sock.close()
    assert info.value.transient
    assert client.usage.retries == 1


async def test_key_from_named_variable_is_sent_and_never_logged(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    secret = "sk-test-very-secret-123"
    monkeypatch.setenv("BF_TEST_KEY", secret)
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []

    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(500, json={"error": {"message": "boom"}})

    client = ModelClient(ModelEndpoint.remote("http://example.invalid/v1", "m", "BF_TEST_KEY"),
                         max_retries=1, backoff_sec=0.01)
    client._sdk = openai.AsyncOpenAI(
        base_url="http://example.invalid/v1", api_key=secret, max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(record)))
    with pytest.raises(ProviderError) as info:
        await client.chat([{"role": "user", "content": "hi"}])
    await client.aclose()
    assert seen == [f"Bearer {secret}"] * 2
    assert secret not in caplog.text
    assert secret not in str(info.value)


def test_unset_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BF_MISSING_KEY", raising=False)
    client = ModelClient(ModelEndpoint.remote("http://127.0.0.1:1", "m", "BF_MISSING_KEY"))
    with pytest.raises(ConfigError, match="BF_MISSING_KEY"):
        client._client()


def test_base_url_gets_v1_once() -> None:
    assert api_base_url("http://h:1") == "http://h:1/v1"
    assert api_base_url("http://h:1/v1/") == "http://h:1/v1"


def _all_openai_exceptions() -> list[type[BaseException]]:
    return [c for c in list(vars(openai).values())
            if inspect.isclass(c) and issubclass(c, openai.OpenAIError)]


def test_every_openai_exception_is_mapped() -> None:
    classes = _all_openai_exceptions()
    assert len(classes) >= 15
    for cls in classes:
        exc = cls.__new__(cls)
        with pytest.raises(ProviderError), map_openai_errors():
            raise exc
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    for status, transient in [(400, False), (401, False), (404, False), (408, True),
                              (422, False), (429, True), (500, True), (503, True)]:
        err = openai.APIStatusError("x", response=httpx.Response(status, request=request),
                                    body=None)
        mapped = to_provider_error(err)
        assert (mapped.status, mapped.transient) == (status, transient)
    assert to_provider_error(openai.APITimeoutError(request)).transient
    assert to_provider_error(openai.APIConnectionError(request=request)).transient
