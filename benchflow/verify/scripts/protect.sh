#!/bin/sh
# protect.sh PATH...: make each PATH (created if missing) root's and unreadable by anyone
# else, so that the agent can neither read nor change the tests or the solution while it
# runs. Exit codes: benchflow/sandbox/exit_codes.py.
set -eu

for p in "$@"; do
    case $p in
        / | //*) exit 64 ;;  # USAGE
        /?*) ;;
        *) exit 64 ;;  # USAGE
    esac
done
if ! is_root; then exit 65; fi  # NOT_ROOT

umask 077
for p in "$@"; do
    mkdir -p -- "$p"
    chown -R -h 0:0 -- "$p"
    chmod -R go-rwx -- "$p"
done
