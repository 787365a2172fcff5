"""The scripted model server: an HTTP server in a background thread, answering from a script.

```python
with ModelServer(load_script("write-then-read.yaml"), host=gateway_ip, log_dir=rollout_dir) as server:
    ...  # point the agent at `server.url` (see docs/how-to/test-agents-offline.md)
```

The server binds in `start()` and serves from a daemon thread, so starting it from async
code does not block the event loop; `async with` stops it in a worker thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio.to_thread

from benchflow._service import HttpService, TrackingHTTPServer
from benchflow.model_server.app import HttpReply, ScriptedModelApp
from benchflow.model_server.capture import ModelCallLog
from benchflow.model_server.script import Script, load_script
from benchflow.model_server.traffic import ModelTraffic

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024 * 1024


def read_body(handler: BaseHTTPRequestHandler, max_bytes: int = MAX_BODY_BYTES) -> bytes:
    """A request's body, chunked or with Content-Length. Raises ValueError past `max_bytes`."""
    if "chunked" in (handler.headers.get("Transfer-Encoding") or "").lower():
        chunks: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
            if sum(map(len, chunks)) > max_bytes:
                raise ValueError("request body too large")
    length = int(handler.headers.get("Content-Length") or 0)
    if length > max_bytes:
        raise ValueError("request body too large")
    return handler.rfile.read(length) if length else b""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "benchflow-model-server"
    timeout = 300
    server: TrackingHTTPServer

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s " + format, self.address_string(), *args)

    def _serve(self) -> None:
        try:
            body = self._read_body()
        except (ValueError, OSError) as exc:
            self.send_error(400, f"unreadable request body: {exc}")
            return
        started = time.time()
        service: ModelServer = self.server.service
        capture, traffic = service.capture, service.traffic
        role = traffic.caller(self.headers, self.path).role if traffic is not None else None
        if traffic is not None:
            where = traffic.where(role)
        else:
            where = capture.where() if capture is not None else None
        reply = service.app.handle(
            self.command, self.path, body, self.headers.get("Content-Encoding"), role=role
        )
        # all that is recorded of the call, before the reply is sent: the agent may end its
        # turn as soon as it has read it, and the turn's tokens and tool results are taken
        # then (`RoleLedger`); a handler thread still writing is not waited for at stop
        if traffic is not None and self.command == "POST":
            traffic.count(role, reply.tokens, model=reply.summary.get("model"),
                          main=reply.summary.get("answer") in ("step", "answer"))
            traffic.note_tools(role, self.path, reply.request)
        if capture is not None:
            response = b"".join(reply.events) if reply.events is not None else reply.payload()
            try:
                capture.record(source="model_server", method=self.command, path=self.path,
                               status=reply.status, started=started, request=body,
                               response=response, content_type=reply.content_type,
                               request_encoding=self.headers.get("Content-Encoding"),
                               where=where)
            except (OSError, ValueError, TypeError) as exc:
                logger.warning("capturing %s %s failed: %s", self.command, self.path, exc)
        try:
            self._write(reply)
        except (BrokenPipeError, ConnectionResetError):
            logger.debug("client went away during %s %s", self.command, self.path)
            self.close_connection = True

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _serve

    def _read_body(self) -> bytes:
        return read_body(self)

    def _write(self, reply: HttpReply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        if reply.events is None:
            payload = reply.payload()
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)
            return
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in reply.events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class ModelServer(HttpService):
    """Serves a script as Anthropic, OpenAI (Chat and Responses) and Gemini model APIs.

    In a benchmark run it stands in for the model provider, so a real agent runs its real
    tools in the real sandbox with no model API reachable. Bind `host` to an address the
    sandbox can reach (the Docker network's gateway); `port=0` picks a free port. Every
    request is appended to `<log_dir>/requests.jsonl` (summary + body).

    Args:
        script: a `Script` or the path of a YAML script.
        host: the address to listen on.
        port: the port to listen on, 0 for any free port.
        log_dir: where `requests.jsonl` goes (typically the rollout directory); None logs in memory only.
        capture: records every call in full (`model_calls.jsonl`, see `capture.py`).
        traffic: the rollout's per-role keys: calls are attributed to (and script answers
            may target) the role whose key they carry, and counted per role.
    """

    what = "the model server"
    handler = _Handler

    def __init__(
        self,
        script: Script | str | Path,
        host: str = "127.0.0.1",
        port: int = 0,
        log_dir: str | Path | None = None,
        capture: ModelCallLog | None = None,
        traffic: ModelTraffic | None = None,
    ) -> None:
        super().__init__(host, port)
        self.capture = capture
        self.traffic = traffic
        self.script = script if isinstance(script, Script) else load_script(script)
        self.app = ScriptedModelApp(self.script, log_dir)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Summaries of the requests served so far, in arrival order."""
        return list(self.app.log.summaries)

    @property
    def log_path(self) -> Path | None:
        """The `requests.jsonl` file, or None when logging in memory only."""
        return self.app.log.path

    def start(self) -> str:
        """Bind and serve in a daemon thread; returns the base URL agents use (no `/v1`),
        e.g. `http://172.17.0.1:41234`. Idempotent.

        Raises:
            ConfigError: the address cannot be bound (in use, not local).
        """
        if self._running:
            return self.url
        url = super().start()
        logger.info("scripted model server %r listening on %s", self.script.name, url)
        return url

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await anyio.to_thread.run_sync(self.stop)


def serve_forever(
    script_path: str | Path,
    host: str = "127.0.0.1",
    port: int = 0,
    log_dir: str | Path | None = None,
    *,
    on_ready: Callable[[str], None] | None = None,
    stop_event: threading.Event | None = None,
) -> None:
    """Run a scripted model server until interrupted (the `benchflow model-server` command).

    Args:
        script_path: the YAML script.
        host: the address to listen on.
        port: the port, 0 for any free port.
        log_dir: where `requests.jsonl` goes.
        on_ready: called with the base URL once listening (the CLI prints it).
        stop_event: stops the server when set (tests); otherwise runs until Ctrl-C.

    Raises:
        ConfigError: the script is invalid or the address cannot be bound.
    """
    server = ModelServer(script_path, host, port, log_dir)
    url = server.start()
    try:
        if on_ready is not None:
            on_ready(url)
        event = stop_event or threading.Event()
        while not event.wait(0.5):
            pass
    except KeyboardInterrupt:
        logger.info("model server interrupted")
    finally:
        server.stop()
