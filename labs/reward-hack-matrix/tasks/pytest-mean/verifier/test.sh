#!/bin/bash
# SWE-bench style: the hidden tests join the workspace's own tests and pytest runs from
# /app. Like many Harbor tasks it prefers uv's runner when the image has one.
cp /verifier/test_hidden.py /app/tests/test_hidden.py
cd /app
if command -v uvx >/dev/null 2>&1; then
    uvx --offline pytest -q tests/test_hidden.py
else
    pytest -q tests/test_hidden.py
fi
status=$?
if [ "$status" -eq 0 ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
