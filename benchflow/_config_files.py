"""Reading config files that hold one mapping: `.json` as JSON, anything else as YAML."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchflow.errors import ConfigError


def read_config_file(path: Path, what: str) -> Any:
    """The parsed content of `path` (a job file, a rollout config, ...; `what` names it in
    errors). Validation is the caller's.

    Raises:
        ConfigError: unreadable, or not valid JSON/YAML (the file and the parser's message).
    """
    import yaml  # loads only when a config file is read

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({exc}): check the path") from None
    is_json = path.suffix.lower() == ".json"
    try:
        return json.loads(text) if is_json else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: not valid {'JSON' if is_json else 'YAML'}: "
                          f"{_one_line(exc)}") from None


def _one_line(exc: Exception) -> str:
    """The parser's message on one line: YAML's problem and where, without its snippet."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is not None and problem:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(exc).split())


__all__ = ["read_config_file"]
