#!/bin/bash
cat >> /app/greet.py <<'PY'


def farewell(name: str) -> str:
    return f"Goodbye, {name}!"
PY
