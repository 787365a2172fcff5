#!/bin/bash
cat > /app/greet.py <<'PY'
def greet(name: str) -> str:
    return f"Hello, {name}!"
PY
