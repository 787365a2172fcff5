#!/bin/bash
set -euo pipefail
sed -i 's/(len(xs) - 1)/len(xs)/' /app/stats.py
