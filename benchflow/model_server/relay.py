"""A relay from a sandbox's network to a real model endpoint (vLLM, a company gateway).

Under the `model-only` network policy a sandbox reaches nothing but an address on the
host. When the model is a real endpoint elsewhere, the relay listens on that host
address and forwards each HTTP request to the endpoint (TLS on the host side),
streaming the response back unchanged. Headers pass through, except that a role's key
(`traffic.ModelTraffic`: each role of the rollout has its own, the only key its sandbox
holds) is replaced by the upstream key, so the upstream key never enters a sandbox; a
request with no role key is refused (401). Every call's tokens are counted for its role.
The log holds one summary line per request (method, path, status, duration, role) and
never headers or bodies. With a `ModelCallLog` (`capture=`), each call's bodies are also
recorded, scrubbed, in `model_calls.jsonl`; with `request_tokens=` ("vllm" or "sglang")
each generation request also asks the upstream for token ids and log-probabilities
(`token_data.py`), the one change the relay makes to a request body.

```python
with ModelRelay("https://gateway.example.com/openai", host=gateway_ip) as relay:
    relay.url   # http://172.18.0.1:41234 -> https://gateway.example.com/openai
```
"""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchflow._service import HttpService, TrackingHTTPServer
from benchflow.errors import ConfigError
from benchflow.model_server.capture import (
    MAX_CAPTURE_BYTES,
    ModelCallLog,
    parse_body,
    parse_response,
)
from benchflow.model_server.server import read_body
from benchflow.model_server.token_data import TokenDialect, with_token_options
from benchflow.model_server.traffic import Caller, ModelTraffic, with_key
from benchflow.model_server.wire import call_usage, request_model

logger = logging.getLogger(__name__)

REQUEST_LOG = "requests.jsonl"
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
               "trailers", "transfer-encoding", "upgrade", "host", "content-length"}
_UPSTREAM_TIMEOUT_SEC = 600.0
_CHUNK = 64 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "benchflow-model-relay"
    timeout = _UPSTREAM_TIMEOUT_SEC
    server: TrackingHTTPServer
    _captured: bytearray
    _content_type: str | None
    _content_encoding: str | None

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def _relay(self) -> None:
        relay: ModelRelay = self.server.service
        traffic = relay.traffic
        started, wall = time.monotonic(), time.time()
        caller = traffic.caller(self.headers, self.path) if traffic is not None else Caller(None)
        if traffic is not None:
            where: dict[str, Any] | None = traffic.where(caller.role)
        else:
            where = relay.capture.where() if relay.capture is not None else None
        status = 502
        try:
            body = relay.prepare(self.command, self.path, self._read_body(),
                                 self.headers.get("Content-Encoding"))
            if traffic is not None and traffic.roles and caller.role is None \
                    and not caller.upstream:
                status = 401
                self._send_error(401, "benchflow model relay: the request carries none of "
                                 "this rollout's role keys (BENCHFLOW_PROVIDER_API_KEY)")
                return
            status = self._forward(relay, body, caller, lambda status: self._observe(
                relay, body, status, wall, where, caller))
        except (OSError, http.client.HTTPException, ValueError) as exc:
            logger.warning("model relay: %s %s failed: %s", self.command, self.path, exc)
            self.close_connection = True
            try:
                self._send_error(502, f"benchflow model relay: {exc}")
            except OSError:
                pass
        finally:
            relay.record({"method": self.command, "path": self.path, "status": status,
                          "duration_sec": round(time.monotonic() - started, 4),
                          **({"role": caller.role} if caller.role is not None else {})})

    def _send_error(self, status: int, message: str) -> None:
        payload = json.dumps({"error": {"message": message}})
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload.encode())

    def _observe(self, relay: ModelRelay, body: bytes, status: int, wall: float,
                 where: dict[str, Any] | None, caller: Caller) -> None:
        """Count the call's tokens for its role, note its tool results, capture it (once the
        upstream's answer is read, before its end is sent on: `_forward`)."""
        if self.command != "POST" or (relay.traffic is None and relay.capture is None):
            return
        try:
            request = parse_body(body, self.headers.get("Content-Encoding"))
            response = parse_response(self.path, bytes(self._captured), self._content_type,
                                      self._content_encoding)
            if relay.traffic is not None:
                if 200 <= status < 300:
                    relay.traffic.count(caller.role, call_usage(self.path, response[1]),
                                        model=request_model(self.path, request),
                                        main=bool(isinstance(request, dict)
                                                  and request.get("tools")))
                relay.traffic.note_tools(caller.role, self.path, request)
            if relay.capture is not None:
                relay.capture.record(
                    source="relay", method=self.command, path=self.path, status=status,
                    started=wall, request=body, response=bytes(self._captured),
                    content_type=self._content_type,
                    truncated=len(self._captured) >= MAX_CAPTURE_BYTES,
                    request_encoding=self.headers.get("Content-Encoding"),
                    response_encoding=self._content_encoding, where=where,
                    parsed=(request, response))
        except (OSError, ValueError, TypeError) as exc:  # the agent already has its answer
            logger.warning("model relay: recording %s %s failed: %s", self.command, self.path,
                           exc)

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _relay

    def _read_body(self) -> bytes:
        return read_body(self)

    def _forward(self, relay: ModelRelay, body: bytes, caller: Caller,
                 observe: Callable[[int], None]) -> int:
        """Send the request upstream and its answer back; returns the status. `observe`
        gets the status once the whole answer is read, before its last chunk is sent: an
        agent ends its turn once it has read the answer (a stream's client at its last
        event), and the turn's tokens and tool results are taken then (`RoleLedger`)."""
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        path = self.path
        upstream_key = relay.traffic.upstream_key if relay.traffic is not None else None
        if caller.role is not None and caller.key and upstream_key is not None:
            headers, path = with_key(headers, path, caller.key, upstream_key)
        headers["Host"] = relay.upstream_netloc
        if body or self.command in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(body))
        conn = relay.connect()
        try:
            conn.request(self.command, relay.upstream_path + path, body=body or None,
                         headers=headers)
            response = conn.getresponse()
            self._captured = bytearray()
            self._content_type = response.getheader("Content-Type")
            self._content_encoding = response.getheader("Content-Encoding")
            self.send_response(response.status, response.reason)
            for key, value in response.getheaders():
                if key.lower() not in _HOP_BY_HOP:
                    self.send_header(key, value)
            if self.command == "HEAD":
                self.send_header("Content-Length", "0")
                self.end_headers()
                return response.status
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            held = b""  # the last chunk goes on after `observe`: a stream's client may end
            while chunk := response.read1(_CHUNK):  # its turn at `[DONE]`, before the end
                if len(self._captured) < MAX_CAPTURE_BYTES:  # read for usage, capture
                    self._captured += chunk[:MAX_CAPTURE_BYTES - len(self._captured)]
                self._send_chunk(held)
                held = chunk
            observe(response.status)
            self._send_chunk(held)
            self.wfile.write(b"0\r\n\r\n")  # the end
            self.wfile.flush()
            return response.status
        finally:
            conn.close()

    def _send_chunk(self, chunk: bytes) -> None:
        """One chunk of a chunked body, flushed (none for b"": a zero chunk is the end)."""
        if chunk:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()


class ModelRelay(HttpService):
    """Forwards HTTP from `host:port` to the model endpoint at `upstream` (its root URL).

    Args:
        upstream: the endpoint's root, e.g. `https://gateway.example.com/openai`; request
            paths are appended to it (`/v1/chat/completions`).
        host: the address to listen on (the sandbox network's gateway).
        port: 0 picks a free port.
        log_dir: where `requests.jsonl` (summaries only) goes; None keeps them in memory.
        capture: records every call in full (`model_calls.jsonl`, see `capture.py`).
        request_tokens: asks the upstream for token ids and log-probabilities in this
            server's options on every generation call (`token_data.py`).
        traffic: the rollout's role keys: with roles, only requests carrying a role key
            (or the upstream key itself, from host-side callers) are forwarded, each with
            the role key replaced by the upstream key; calls are counted per role.
    """

    what = "the model relay"
    handler = _Handler

    def __init__(self, upstream: str, host: str = "127.0.0.1", port: int = 0,
                 log_dir: str | Path | None = None,
                 capture: ModelCallLog | None = None,
                 request_tokens: TokenDialect | None = None,
                 traffic: ModelTraffic | None = None) -> None:
        super().__init__(host, port)
        self.capture = capture
        self.request_tokens = request_tokens
        self.traffic = traffic
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"model endpoint {upstream!r} must be an http(s) URL")
        self.upstream = upstream
        self.upstream_scheme = parts.scheme
        self.upstream_netloc = parts.netloc
        self.upstream_path = parts.path.rstrip("/")
        self.log_path = Path(log_dir) / REQUEST_LOG if log_dir is not None else None
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def connect(self) -> http.client.HTTPConnection:
        parts = urlsplit(self.upstream)
        if self.upstream_scheme == "https":
            return http.client.HTTPSConnection(parts.hostname or "", parts.port,
                                               timeout=_UPSTREAM_TIMEOUT_SEC,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(parts.hostname or "", parts.port,
                                          timeout=_UPSTREAM_TIMEOUT_SEC)

    def prepare(self, method: str, path: str, body: bytes, encoding: str | None) -> bytes:
        """The request body to forward: with the token options of `request_tokens` added to
        generation calls (an encoded body is forwarded as it is)."""
        if self.request_tokens is None or method != "POST" or encoding:
            return body
        return with_token_options(body, path, self.request_tokens)

    def record(self, summary: dict[str, Any]) -> None:
        with self._lock:
            summary = {"seq": len(self.requests), "ts": time.time(), "relay": True, **summary}
            self.requests.append(summary)
            if self.log_path is not None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                with self.log_path.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"summary": summary}) + "\n")

    def start(self) -> str:
        """Bind and serve in a daemon thread; returns the URL (same path layout as the
        upstream root). Idempotent.

        Raises:
            ConfigError: the address cannot be bound.
        """
        if self._running:
            return self.url
        url = super().start()
        logger.info("model relay %s -> %s", url, self.upstream)
        return url


__all__ = ["ModelRelay"]
