#!/bin/bash
# Serve the agent's site over HTTP, fetch the summary with curl and compare it with the
# expected one (whitespace ignored). Bash decides the reward; no test framework.
python3 -m http.server 8765 --bind 127.0.0.1 --directory /app/site >/dev/null 2>&1 &
server=$!
got=""
for _ in $(seq 50); do
    if got=$(curl -fsS http://127.0.0.1:8765/summary.json 2>/dev/null); then
        break
    fi
    sleep 0.1
done
kill "$server" 2>/dev/null
want=$(cat /tests/expected.json)
if [ -n "$got" ] && [ "$(tr -d '[:space:]' <<<"$got")" = "$(tr -d '[:space:]' <<<"$want")" ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo "summary.json: got '${got:0:200}', want '$want'"
    echo 0 > /logs/verifier/reward.txt
fi
