#!/bin/bash
# Runs in the verifier's own sandbox: only /app/out (the artifact) and /logs came along.
python3 - <<'PY'
import json, pathlib
report = pathlib.Path("/app/out/report.json")
print("input.txt present:", pathlib.Path("/app/input.txt").exists())
print("agent notes present:", pathlib.Path("/app/notes.txt").exists())
try:
    ok = json.loads(report.read_text()) == {"lines": 3}
except (OSError, ValueError) as exc:
    print("no valid report:", exc)
    ok = False
pathlib.Path("/logs/verifier/reward.txt").write_text("1\n" if ok else "0\n")
PY
