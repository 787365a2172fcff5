#!/bin/sh
# Stop every process of the container but its init (PID 1) and the command that keeps it
# up (`sleep infinity`, a child of PID 1): first SIGSTOP (nothing writes another byte),
# then SIGKILL. Run as root by the disk watchdog; takes no arguments.
set -u
self=$$
for signal in STOP KILL; do
  for dir in /proc/[0-9]*; do
    pid=${dir#/proc/}
    [ "$pid" = 1 ] && continue
    [ "$pid" = "$self" ] && continue
    ppid=$(sed -n 's/^PPid:[[:space:]]*//p' "$dir/status" 2>/dev/null) || continue
    [ "$ppid" = "$self" ] && continue
    if [ "$ppid" = 1 ] && [ "$(cat "$dir/comm" 2>/dev/null)" = sleep ]; then
      continue
    fi
    kill "-$signal" "$pid" 2>/dev/null || true
  done
done
exit 0
