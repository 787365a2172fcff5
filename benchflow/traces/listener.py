"""An OTLP/HTTP trace receiver on the host: `POST /v1/traces` (protobuf or JSON).

`benchflow run ... -a http` starts one (`--trace-listen`, default `127.0.0.1:4318`, the
standard OTLP/HTTP port, which the SDKs send to by default) and files each span into
its attempt's folder; `benchflow traces serve` runs one on its own. Bad requests never
stop it: a body that does not decode is answered 400, one over `max_body_bytes` 413,
and both are counted (`GET /health` shows the counts).
"""

from __future__ import annotations

import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Self

from benchflow._service import HttpService, TrackingHTTPServer
from benchflow.errors import ConfigError
from benchflow.traces.otlp import OtlpDecodeError, OtlpTooLarge, decode_request, decompress
from benchflow.traces.store import TraceStore

log = logging.getLogger(__name__)

DEFAULT_LISTEN = "127.0.0.1:4318"
"""Where `benchflow run -a http` listens for traces unless `--trace-listen` says otherwise."""
MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest request accepted (after decompression); larger ones get 413."""


def parse_listen(value: str) -> tuple[str, int] | None:
    """`HOST:PORT` (or `PORT`, on 127.0.0.1) as a pair; `none` as None.

    Raises:
        ConfigError: not of that form.
    """
    if value.strip().lower() in ("none", "off", ""):
        return None
    host, sep, port = value.strip().rpartition(":")
    host = host.strip("[]") if sep else "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535 or not host:
        raise ConfigError(f"--trace-listen {value!r}: expected HOST:PORT (e.g. "
                          f"{DEFAULT_LISTEN}), PORT, or none")
    return host, number


class _Handler(BaseHTTPRequestHandler):
    server: TrackingHTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet: counted instead
        log.debug("traces: " + format, *args)

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _problem(self, status: HTTPStatus, message: str) -> None:
        self._answer(status, json.dumps({"error": message}).encode(), "application/json")

    def do_GET(self) -> None:
        if self.path.split("?")[0] in ("/", "/health"):
            body = json.dumps({"status": "ok", **self.server.service.store.counts.as_dict()})
            self._answer(HTTPStatus.OK, body.encode(), "application/json")
        else:
            self._problem(HTTPStatus.NOT_FOUND, "POST OTLP spans to /v1/traces")

    def _read_body(self) -> bytes | None:
        """The request body (Content-Length or chunked); None when over the limit."""
        limit = self.server.service.max_body_bytes
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts, size = [], 0
            while True:
                line = self.rfile.readline(1024)
                try:
                    chunk = int(line.split(b";")[0].strip() or b"0", 16)
                except ValueError:
                    chunk = 0
                if chunk == 0:
                    while self.rfile.readline(1024).strip():  # trailers, then the blank line
                        pass
                    return b"".join(parts)
                size += chunk
                if size > limit:
                    return None
                parts.append(self.rfile.read(chunk))
                self.rfile.readline(8)  # the CRLF after each chunk
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return None
        if length < 0 or length > limit:
            return None
        return self.rfile.read(length)

    def do_POST(self) -> None:
        store = self.server.service.store
        with self.server.service.count_lock:
            store.counts.requests += 1
        if self.path.split("?")[0] != "/v1/traces":
            self._problem(HTTPStatus.NOT_FOUND, "POST OTLP spans to /v1/traces")
            return
        body = self._read_body()
        if body is None:
            with self.server.service.count_lock:
                store.counts.oversized_requests += 1
            self.close_connection = True  # the rest of the body is not read
            self._problem(HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
                          f"at most {self.server.service.max_body_bytes} bytes")
            return
        content_type = self.headers.get("Content-Type")
        try:
            data = decompress(body, self.headers.get("Content-Encoding"),
                              self.server.service.max_body_bytes)
            spans = decode_request(data, content_type)
        except OtlpTooLarge as exc:
            with self.server.service.count_lock:
                store.counts.oversized_requests += 1
            self._problem(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, str(exc))
            return
        except OtlpDecodeError as exc:
            with self.server.service.count_lock:
                store.counts.malformed_requests += 1
            self._problem(HTTPStatus.BAD_REQUEST, str(exc))
            return
        store.add(spans)
        self.server.service.received.set()
        if (content_type or "").startswith("application/json"):
            self._answer(HTTPStatus.OK, b"{}", "application/json")
        else:  # an empty ExportTraceServiceResponse
            self._answer(HTTPStatus.OK, b"", "application/x-protobuf")


class TraceListener(HttpService):
    """The receiver, serving in a background thread: `start()`, then `stop()`."""

    what = "trace listener"
    listen_hint = " (choose another --trace-listen HOST:PORT, or none)"
    handler = _Handler

    def __init__(self, store: TraceStore, host: str = "127.0.0.1", port: int = 4318, *,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        super().__init__(host, port)
        self.store = store
        self.max_body_bytes = max_body_bytes
        self.count_lock = threading.Lock()
        self.received = threading.Event()

    @property
    def url(self) -> str:
        """The OTLP/HTTP endpoint to give the SDKs (also once stopped: the counts name it)."""
        return self.address

    def start(self) -> Self:  # type: ignore[override]  # the listener, for chaining
        """Bind and serve (port 0 picks a free port; `port` then holds it); `url` is the
        OTLP/HTTP endpoint to give the SDKs.

        Raises:
            ConfigError: the address cannot be bound.
        """
        if not self._running:
            super().start()
            log.info("trace listener on %s", self.url)
        return self

    def quiet_for(self, seconds: float, at_most: float) -> None:
        """Wait until no request came for `seconds` (at most `at_most` in all): spans an
        endpoint exports just after answering still get filed."""
        import time

        if not self._running:
            return
        deadline = time.monotonic() + at_most
        while time.monotonic() < deadline:
            self.received.clear()
            if not self.received.wait(min(seconds, deadline - time.monotonic())):
                return


__all__ = ["DEFAULT_LISTEN", "MAX_BODY_BYTES", "TraceListener", "parse_listen"]
