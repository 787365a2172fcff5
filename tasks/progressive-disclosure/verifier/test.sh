#!/bin/bash
# reward = 1 when every test passes; reward.json also carries the passed fraction.
cd /app
python3 -m pytest -q -rA /verifier/test_slug.py > /logs/verifier/pytest.txt 2>&1
status=$?
cat /logs/verifier/pytest.txt
passed=$(grep -c '^PASSED' /logs/verifier/pytest.txt)
total=4
reward=0
[ "$status" -eq 0 ] && reward=1
printf '{"reward": %s, "passed_fraction": %s}\n' "$reward" \
    "$(awk -v p="$passed" -v t="$total" 'BEGIN { printf "%.2f", p / t }')" > /logs/verifier/reward.json
