#!/bin/bash
# Reward 1 when /app/hello.txt holds exactly "Hello, world!", else 0.
if [ "$(cat /app/hello.txt 2>/dev/null)" = "Hello, world!" ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo "hello.txt missing or wrong: '$(cat /app/hello.txt 2>/dev/null)'"
    echo 0 > /logs/verifier/reward.txt
fi
