"""The reference HTTP agent (examples/http-agent/app.py) served on 127.0.0.1 for tests."""

from __future__ import annotations

import importlib.util
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

APP = Path(__file__).parents[1] / "examples" / "http-agent" / "app.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("http_agent_example", APP)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def serve(token: str | None = None) -> Iterator[str]:
    """Run the reference endpoint on a free port; yields its base URL, stops it after."""
    import uvicorn

    app = load_example().create_app(token)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("reference endpoint did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
