#!/bin/bash
# reward: farewell() right, greet() still right, and the step's setup.sh ran first.
cd /app
python3 - <<'PY'
import json, pathlib, sys
sys.path.insert(0, "/app")
checks = {}
try:
    from greet import farewell, greet
    checks["farewell"] = float(farewell("Ada") == "Goodbye, Ada!")
    checks["greet"] = float(greet("Ada") == "Hello, Ada!")
except Exception as exc:  # noqa: BLE001
    print("import failed:", exc)
    checks = {"farewell": 0.0, "greet": 0.0}
checks["setup_ran"] = float(pathlib.Path("/app/.setup-ran").exists())
checks["reward"] = float(all(v == 1.0 for v in checks.values()))
print(checks)
pathlib.Path("/logs/verifier/reward.json").write_text(json.dumps(checks))
PY
