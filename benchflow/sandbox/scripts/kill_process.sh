#!/bin/sh
# kill_process.sh PIDFILE MARKER: kill the process group a live process started, and any
# process still carrying its marker in the environment. The pid file is written by the
# (possibly untrusted) process itself, so it is trusted only when /proc confirms the marker.
set -u
pidfile=$1
marker="BENCHFLOW_PROC_ID=$2"
has_marker() { tr '\0' '\n' < "/proc/$1/environ" 2>/dev/null | grep -qxF "$marker"; }
pid=$(cat "$pidfile" 2>/dev/null || true)
case "$pid" in
    ''|*[!0-9]*) pid= ;;
esac
if [ -n "$pid" ] && [ "$pid" -gt 1 ] && has_marker "$pid"; then
    kill -KILL -- "-$pid" 2>/dev/null || true
fi
for dir in /proc/[0-9]*; do
    p=${dir#/proc/}
    [ "$p" -gt 1 ] && [ "$p" != $$ ] && has_marker "$p" && kill -KILL "$p" 2>/dev/null
done
rm -f "$pidfile"
exit 0
