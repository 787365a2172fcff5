#!/bin/bash
# Reward 1 when fizzbuzz is right for 1..100 and a review was written.
cd /app
if [ ! -s review.md ]; then
    echo "no review.md: the reviewer role did not run"
    echo 0 > /logs/verifier/reward.txt
    exit 0
fi
if python3 - <<'PY'
import sys
sys.path.insert(0, "/app")
from fizzbuzz import fizzbuzz

def expected(n):
    return "FizzBuzz" if n % 15 == 0 else "Fizz" if n % 3 == 0 else "Buzz" if n % 5 == 0 else str(n)

wrong = [n for n in range(1, 101) if fizzbuzz(n) != expected(n)]
print("wrong for:", wrong[:10])
sys.exit(1 if wrong else 0)
PY
then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
