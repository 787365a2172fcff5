#!/bin/sh
# Reward 1 when the coder summed 3, 4, 5 into sum.txt, the reviewer approved in review.md
# and the coder answered the review in done.txt; else 0.
numbers=$(tr -s ' \n' ' ' < /app/numbers.txt 2>/dev/null)
total=$(tr -d ' \n' < /app/sum.txt 2>/dev/null)
if [ "$numbers" = "3 4 5 " ] && [ "$total" = "12" ] \
    && grep -q '^approved' /app/review.md 2>/dev/null \
    && grep -q '^done' /app/done.txt 2>/dev/null; then
    echo 1 > /logs/verifier/reward.txt
else
    echo "numbers.txt: '$numbers'; sum.txt: '$total'; review.md: '$(cat /app/review.md 2>/dev/null)'; done.txt: '$(cat /app/done.txt 2>/dev/null)'"
    echo 0 > /logs/verifier/reward.txt
fi
