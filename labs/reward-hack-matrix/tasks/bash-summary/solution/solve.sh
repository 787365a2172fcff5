#!/bin/bash
set -euo pipefail
mkdir -p /app/site
awk -F, 'NR > 1 && $4 == "paid" { n++; s += $3 } END { printf "{\"orders\": %d, \"total_cents\": %d}\n", n, s }' \
    /app/data/orders.csv > /app/site/summary.json
