"""Per-account balances of a date,account,amount CSV ledger: balances.py LEDGER OUT."""

import csv
import sys

totals: dict[str, int] = {}
with open(sys.argv[1]) as fh:
    for row in csv.DictReader(fh):
        totals[row["account"]] = totals.get(row["account"], 0) + int(row["amount"])
with open(sys.argv[2], "w") as out:
    for account in sorted(totals):
        out.write(f"{account}={totals[account]}\n")
