#!/bin/bash
# The objective half: /app/haiku.txt has exactly three non-empty lines (reward 1, else 0).
# The judge scores the rest (see verifier.md); both scores land in rewards.
lines=$(grep -c . /app/haiku.txt 2>/dev/null || true)
if [ "$(wc -l < /app/haiku.txt 2>/dev/null)" = 3 ] && [ "$lines" = 3 ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo "haiku.txt missing or not three lines"
    echo 0 > /logs/verifier/reward.txt
fi
