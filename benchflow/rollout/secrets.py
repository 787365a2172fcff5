"""Keep secrets out of the files we write: configs are redacted before they are saved."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

REDACTED = "***"
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable name looks like it holds a credential."""
    return bool(_SECRET_NAME.search(name))


def redact(value: Any) -> Any:
    """Replace the values of secret-looking keys, and every value of a `headers` mapping
    (an http agent's: all of them may be credentials), recursively."""
    if isinstance(value, dict):
        return {k: ({h: REDACTED for h in v} if k == "headers" and isinstance(v, dict)
                    else REDACTED if isinstance(v, str) and is_secret_name(str(k))
                    else redact(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def redacted_config_json(model: BaseModel) -> str:
    """`model` as indented JSON with secret-looking env values replaced by `***`."""
    return json.dumps(redact(model.model_dump(mode="json")), indent=2)
