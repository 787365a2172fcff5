#!/bin/sh
# Reward 1 when /app/numbers.txt holds 3, 4, 5 and /app/sum.txt their sum, else 0.
numbers=$(tr -s ' \n' ' ' < /app/numbers.txt 2>/dev/null)
total=$(tr -d ' \n' < /app/sum.txt 2>/dev/null)
if [ "$numbers" = "3 4 5 " ] && [ "$total" = "12" ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo "numbers.txt: '$numbers'; sum.txt: '$total'"
    echo 0 > /logs/verifier/reward.txt
fi
