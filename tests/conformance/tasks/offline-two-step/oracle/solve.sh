#!/bin/sh
printf '3\n4\n5\n' > /app/numbers.txt
awk '{ s += $1 } END { print s }' /app/numbers.txt > /app/sum.txt
