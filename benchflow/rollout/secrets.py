"""Keep secrets out of the files we write: configs are redacted before they are saved."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

REDACTED = "***"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable name looks like it holds a credential."""
    return bool(_SECRET_NAME.search(name))


def redact(value: Any, keep: Callable[[str], bool] | None = None, *,
           _env: bool = False) -> Any:
    """Replace the values of secret-looking keys in every `env` mapping, recursively.

    The one redaction of saved configs (rollout and job config.json). A value for which
    `keep(value)` is true stays (a `${VAR}` reference names a secret without holding it).
    Keys outside `env` mappings are left alone (`api_key_env` names a variable).
    """
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if _env and isinstance(v, str) and is_secret_name(str(k)) and not (keep and keep(v)):
                out[k] = REDACTED
            else:
                out[k] = redact(v, keep, _env=k == "env")
        return out
    if isinstance(value, list):
        return [redact(v, keep) for v in value]
    return value


def redacted_config_json(model: BaseModel) -> str:
    """`model` as indented JSON with secret-looking env values replaced by `***`."""
    return json.dumps(redact(model.model_dump(mode="json")), indent=2)
