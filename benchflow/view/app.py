"""The viewer's ASGI app (Starlette): pages rendered from the jobs folder on each request.

```text
/  /index.html                                       jobs, newest first
/jobs/<job>/index.html                               trials, per-agent aggregates, matrix
/jobs/<job>/<agent>/<dataset>/<task>__<n>/index.html result, logs, trajectory page 1
/jobs/<job>/<agent>/<dataset>/<task>__<n>/page-<k>.html   trajectory page k
/compare.html?job=<job>&job=<job>[&baseline=<arm>]   jobs compared (benchflow.view.compare);
                                                     no jobs: the study at the root
/side-by-side.html?a=<job>/<trial>&b=<job>/<trial>   two trials of a task side by side
/studies/<study>/...                                 a study folder under the root, as a
                                                     viewer of its own (its arms are jobs)
/raw/<path under the jobs folder>                    a log file as plain text
/static/...                                          CSS and JS
```

Every path taken from a URL is resolved with `data.resolve_inside()`; anything that would
leave the jobs folder is a 404.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from benchflow.errors import ConfigError
from benchflow.view import data
from benchflow.view.render import Pages

STATIC_DIR = Path(__file__).parent / "static"
_PAGE = re.compile(r"^page-(\d+)\.html$")
_RAW_LIMIT = 32 * 1024 * 1024


def _not_found(what: str = "not found") -> Response:
    return PlainTextResponse(what, status_code=404)


def create_app(root: Path, base: str = "/") -> Starlette:
    """The viewer for the jobs folder `root`, served under `base`."""
    pages = Pages(root, base=base)

    async def jobs(request: Request) -> Response:
        return HTMLResponse(pages.jobs())

    async def job_or_trial(request: Request) -> Response:
        parts = request.path_params["rest"].split("/")
        if parts and parts[-1] == "":
            parts[-1] = "index.html"
        leaf = parts[-1] if parts else ""
        page_match = _PAGE.match(leaf)
        if leaf != "index.html" and not page_match:
            return _not_found()
        target = data.resolve_inside(root, parts[:-1])
        if target is None or not target.is_dir():
            return _not_found()
        depth = len(parts) - 1
        if depth == 1 and not page_match:
            return HTMLResponse(pages.job(target))
        if depth == 4:
            job_dir = target.parent.parent.parent
            html = pages.trial(job_dir, target, int(page_match.group(1)) if page_match else 1)
            return HTMLResponse(html) if html is not None else _not_found("no such page")
        return _not_found()

    async def compare(request: Request) -> Response:
        query = request.query_params
        names = [*query.getlist("job"), *(n for n in (query.get("a"), query.get("b")) if n)]
        sources = [data.resolve_inside(root, [name]) for name in names]
        if not names and (root / "study.json").is_file():
            sources = [root]
        if not sources or any(s is None or not s.is_dir() for s in sources):
            return _not_found("choose jobs: /compare.html?job=<job>&job=<job>")
        html = await anyio.to_thread.run_sync(  # statistics and figures: off the event loop
            lambda: pages.compare([s for s in sources if s is not None], query.get("baseline"),
                                  query.get("errors", "exclude")))
        return HTMLResponse(html)

    async def side_by_side(request: Request) -> Response:
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        html = pages.side_by_side(a, b)
        return HTMLResponse(html) if html is not None else _not_found("no such trials")

    studies: dict[str, Starlette] = {}

    async def study(scope: Scope, receive: Receive, send: Send) -> None:
        name = scope["path_params"]["study"]
        folder = data.resolve_inside(root, [name])
        if folder is None or not (folder / "study.json").is_file():
            await _not_found("no such study")(scope, receive, send)
            return
        if name not in studies:
            studies[name] = create_app(folder, base=f"{base}studies/{name}/")
        await studies[name](scope, receive, send)

    async def raw(request: Request) -> Response:
        target = data.resolve_inside(root, request.path_params["rest"].split("/"))
        if target is None or not target.is_file():
            return _not_found()
        if target.stat().st_size > _RAW_LIMIT:
            text, _, _ = data.read_text(target, _RAW_LIMIT)
            return PlainTextResponse(pages.redact.text(text))
        return PlainTextResponse(pages.redact.text(target.read_bytes().decode("utf-8",
                                                                               "replace")))

    routes = [
        Route("/", jobs),
        Route("/index.html", jobs),
        Route("/compare.html", compare),
        Route("/side-by-side.html", side_by_side),
        Mount("/studies/{study}", app=study),
        Route("/jobs/{rest:path}", job_or_trial),
        Route("/raw/{rest:path}", raw),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    return Starlette(routes=routes)


def serve(root: Path, host: str = "127.0.0.1", port: int = 8700,
          ready: Callable[[str], None] | None = None) -> None:
    """Serve the viewer until interrupted; `ready` gets the URL once the port is bound
    (`port=0` picks a free one).

    Raises:
        ConfigError: the address cannot be bound.
    """
    import uvicorn

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"benchflow view cannot listen on {host}:{port}: {exc.strerror or exc}"
                          " (choose another --port, or --port 0 for any free one)") from exc
    bound = sock.getsockname()[1]
    if ready is not None:
        ready(f"http://{host if ':' not in host else f'[{host}]'}:{bound}/")
    server = uvicorn.Server(uvicorn.Config(create_app(root), log_level="warning"))
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
