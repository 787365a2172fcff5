"""One lifecycle for the services benchflow runs in a daemon thread (the model server, the
relay, the tool server, the trace listener): `start()` binds (port 0: a free one) and
returns the URL, `stop()` releases the port, both idempotent, `with` does both.
`HttpService` serves `http.server` handlers and closes open connections at `stop()`, so a
client that stays connected never holds it up.
"""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self

from benchflow.errors import ConfigError

log = logging.getLogger(__name__)


class ThreadedService:
    """Start/stop and the URL of a server in a daemon thread; `what` names it in errors."""

    what: ClassVar[str] = "the service"
    listen_hint: ClassVar[str] = ""
    """Appended to the error when the address cannot be bound (what to do instead)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host, self.port = host, port
        self._thread: threading.Thread | None = None
        self._running = False

    @property
    def url(self) -> str:
        """`http://HOST:PORT` (no path).

        Raises:
            RuntimeError: the service is not running.
        """
        if not self._running:
            raise RuntimeError(f"{self.what} is not started")
        return self.address

    @property
    def address(self) -> str:
        """`http://HOST:PORT`, running or not (the port is the bound one once started)."""
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"http://{host}:{self.port}"

    def start(self) -> str:
        """Bind and serve in a daemon thread; returns the URL. Idempotent.

        Raises:
            ConfigError: the address cannot be bound (in use, not local).
        """
        if self._running:
            return self.url
        try:
            self._serve()
        except OSError as exc:
            raise ConfigError(f"{self.what} cannot listen on {self.host}:{self.port}: "
                              f"{exc.strerror or exc}{self.listen_hint}") from exc
        self._running = True
        return self.url

    def stop(self) -> None:
        """Stop serving and release the port. Idempotent."""
        if not self._running:
            return
        self._running = False
        self._shutdown()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    def _serve(self) -> None:  # bind and start the thread (OSError: cannot bind)
        raise NotImplementedError

    def _shutdown(self) -> None:  # make the thread end
        raise NotImplementedError

    def _run_thread(self, target: Any, **kwargs: Any) -> None:
        self._thread = threading.Thread(target=target, kwargs=kwargs, daemon=True,
                                        name=f"{self.what}:{self.port}")
        self._thread.start()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TrackingHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that knows its open connections (closed by `close_all()`);
    `service` is the `HttpService` it serves, for the handlers."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 service: Any) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.service = service
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        try:
            super().finish_request(request, client_address)
        finally:
            with self.connections_lock:
                self.connections.discard(request)

    def close_all(self) -> None:
        with self.connections_lock:
            open_connections = list(self.connections)
        for conn in open_connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class HttpService(ThreadedService):
    """A `ThreadedService` on `http.server`: requests go to `handler`, whose
    `self.server.service` is this object."""

    handler: ClassVar[type[BaseHTTPRequestHandler]]

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(host, port)
        self._httpd: TrackingHTTPServer | None = None

    def _serve(self) -> None:
        httpd = TrackingHTTPServer((self.host, self.port), self.handler, self)
        self._httpd, self.port = httpd, httpd.server_address[1]
        self._run_thread(httpd.serve_forever, poll_interval=0.05)

    def _shutdown(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.close_all()
            httpd.server_close()


__all__ = ["HttpService", "ThreadedService", "TrackingHTTPServer"]
