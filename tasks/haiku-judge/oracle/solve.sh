#!/bin/bash
set -euo pipefail
printf '%s\n' "Waves fold into foam" "the tide writes and erases" "salt on the cold stones" > /app/haiku.txt
