"""The web viewer: `benchflow view [JOBS_DIR]` serves jobs, trials and trajectories;
`benchflow view --export DIR` writes a static copy.

Needs the `view` extra (starlette, uvicorn); importing this package does not import them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["create_app", "export_site", "serve"]


def create_app(root: Path) -> Starlette:
    """The Starlette app serving the jobs folder `root` (see `benchflow.view.app`)."""
    from benchflow.view.app import create_app as _create

    return _create(root)


def serve(root: Path, host: str = "127.0.0.1", port: int = 8700,
          ready: Callable[[str], None] | None = None) -> None:
    """Serve the viewer for `root` until interrupted; `ready(url)` once listening."""
    from benchflow.view.app import serve as _serve

    _serve(root, host=host, port=port, ready=ready)


def export_site(root: Path, out: Path) -> int:
    """Write a static copy of the viewer for `root` into `out`; returns the pages written."""
    from benchflow.view.export import export_site as _export

    return _export(root, out)
