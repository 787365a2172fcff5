#!/bin/bash
# Run the hidden tests against /app/stats.py; reward 1 only if all pass.
cd /app
if python3 -m pytest -q /verifier/test_stats.py; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
