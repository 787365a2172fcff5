#!/bin/bash
set -euo pipefail
cat > /app/slug.py <<'PY'
import re


def slugify(text: str) -> str:
    text = re.sub(r"[^a-z0-9 -]", "", text.lower())
    return re.sub(r"[ -]+", "-", text).strip("-")
PY
