#!/bin/sh
# lock_workspace.sh WORKSPACE: before the final verifier, the workspace becomes root's and
# unwritable by anyone else (files keep their other mode bits), so that no agent user, and
# no judge running as its own user, can change what is being scored. The verifier runs as
# root and still writes where it wants. Exit codes: benchflow/sandbox/exit_codes.py.
set -eu

if [ $# -ne 1 ]; then exit 64; fi  # USAGE
ws=$1
case $ws in
    / | //*) exit 64 ;;  # USAGE
    /?*) ;;
    *) exit 64 ;;  # USAGE
esac
if ! is_root; then exit 65; fi  # NOT_ROOT

if [ -d "$ws" ]; then
    chown -R -h 0:0 -- "$ws"
    # symlinks are never followed (-h above; chmod skips them under -R when not given)
    chmod -R go-w -- "$ws"
fi
