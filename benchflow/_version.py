"""benchflow's installed version (`benchflow.__version__`, and provenance in study files)."""

from __future__ import annotations

import functools


@functools.cache
def package_version() -> str:
    """The installed distribution's version ("0.0.0+unknown" in an uninstalled tree)."""
    # importlib.metadata costs ~40 ms to import: only when the version is asked for
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("benchflow")
    except PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+unknown"
