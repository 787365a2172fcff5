#!/bin/bash
# Reward 1 when /app/balances.txt holds the right balance of every account, sorted.
python3 - <<'PY'
import csv, pathlib, sys
totals = {}
with open("/app/ledger.csv") as fh:
    for row in csv.DictReader(fh):
        totals[row["account"]] = totals.get(row["account"], 0) + int(row["amount"])
want = "".join(f"{a}={totals[a]}\n" for a in sorted(totals))
path = pathlib.Path("/app/balances.txt")
got = path.read_text() if path.exists() else "(missing)"
print("expected:\n" + want + "got:\n" + got)
pathlib.Path("/logs/verifier/reward.txt").write_text("1\n" if got == want else "0\n")
PY
