#!/bin/bash
# Terminal-Bench 2's verifier line: pytest and its ctrf plugin come from uvx at verify time
# (Terminal-Bench also passes `-p 3.13`, which downloads a Python; none is reachable here).
if ! command -v uvx >/dev/null 2>&1; then
    curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
    source "$HOME/.local/bin/env"
fi
# (unlike Terminal-Bench: up to three tries while uv exits 2, which is how it reports a
# failed download; a download through this machine's proxy can stall past uv's 30 s, or
# its DNS fail for a while, hence the pauses. pytest's own 2, a collection error, only
# runs again to the same end.)
for attempt in 1 2 3; do
    if [ $attempt -gt 1 ]; then sleep $((attempt * 10)); fi
    uvx -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
    status=$?
    if [ $status -ne 2 ]; then break; fi
done
if [ $status -eq 0 ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
