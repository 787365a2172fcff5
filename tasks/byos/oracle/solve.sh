#!/bin/bash
# Reference solution: sum the amounts per account.
set -euo pipefail
python3 - <<'PY'
import csv
totals = {}
with open("/app/ledger.csv") as fh:
    for row in csv.DictReader(fh):
        totals[row["account"]] = totals.get(row["account"], 0) + int(row["amount"])
with open("/app/balances.txt", "w") as out:
    for account in sorted(totals):
        out.write(f"{account}={totals[account]}\n")
PY
