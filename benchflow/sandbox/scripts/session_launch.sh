#!/bin/sh
# session_launch.sh PIDFILE ENVFILE CWD ARGV...: run ARGV as the live process of a Daytona
# session command. The daemon's input FIFO never reaches EOF (it is held open) and gets a
# newline appended to every write, so stdin arrives in frames "<n>\n<n bytes>\n"; any
# non-numeric header closes ARGV's stdin. ENVFILE (optional, deleted once read) keeps
# secrets off command lines.
set -u
pidfile=$1 envfile=$2 dir=$3
shift 3
in="$pidfile.in"
rm -f "$in" && mkfifo -m 600 "$in" || exit 126
if [ -n "$envfile" ]; then
    # shellcheck source=/dev/null  # written by the adapter for this one process
    . "$envfile" || exit 126
    rm -f "$envfile"
fi
exec 3<&0
(
    while IFS= read -r n <&3; do
        case $n in ''|*[!0-9]*) break ;; esac
        head -c "$n" <&3 || break
        IFS= read -r _ <&3
    done
) > "$in" &
fwd=$!
exec 3<&-
if cd "$dir"; then
    "$@" < "$in"
    rc=$?
else
    exec < "$in"  # unblock the forwarder's open
    rc=126
fi
kill "$fwd" 2>/dev/null
rm -f "$in"
exit "$rc"
