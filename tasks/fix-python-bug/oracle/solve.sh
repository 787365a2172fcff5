#!/bin/bash
set -euo pipefail
sed -i 's|sum(values) / (len(values) + 1)|sum(values) / len(values)|' /app/stats.py
