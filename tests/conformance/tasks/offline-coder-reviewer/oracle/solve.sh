#!/bin/sh
printf '3\n4\n5\n' > /app/numbers.txt
echo 12 > /app/sum.txt
echo 'approved: 3+4+5 = 12' > /app/review.md
echo done > /app/done.txt
