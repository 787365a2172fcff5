"""Keep secrets out of the files we write: configs are redacted before they are saved."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

REDACTED = "***"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable name looks like it holds a credential."""
    return bool(_SECRET_NAME.search(name))


def redact(value: Any) -> Any:
    """Replace the values of secret-looking keys in every `env` mapping, recursively."""
    if isinstance(value, dict):
        return {k: (REDACTED if isinstance(v, str) and is_secret_name(str(k)) else redact(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret value (longest first, so no prefix leaks) replaced by `***`."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def redacted_config_json(model: BaseModel) -> str:
    """`model` as indented JSON with secret-looking env values replaced by `***`."""
    return json.dumps(redact(model.model_dump(mode="json")), indent=2)
