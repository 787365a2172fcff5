#!/usr/bin/env bash
# Run a command with two busy loops beside it (a loaded machine), then stop the loops.
# Prints the load averages before and after; exits with the command's code.
set -u
python3 -c 'while True: pass' & first=$!
python3 -c 'while True: pass' & second=$!
trap 'kill "$first" "$second" 2>/dev/null' EXIT
echo "with-cpu-hogs: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$@"
code=$?
echo "with-cpu-hogs: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$code"
