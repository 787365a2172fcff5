#!/bin/sh
# seal.sh MOUNT LOGS LOCK TOOLS: after the verifier upload, make the verifier folder root's
# (common.sh is prepended). /logs/verifier itself is emptied and recreated by the exec that
# starts test.sh (runner.run_test_script), so nothing can be planted between the two.
#   MOUNT  the verifier folder; always chowned to root (an upload keeps the host's uid,
#          which may be the agent's inside the sandbox)
#   LOGS   /logs/verifier
#   LOCK   1: MOUNT becomes root-only (0700), LOGS root's, and LOGS's parent unwritable by
#          others, so that nobody but root can replace LOGS
#   TOOLS  where uv and pip build the verifier's tools (verifier_env.tool_env): deleted and
#          recreated empty, root-owned 0755, whatever was there (only root can write it)
# Exit codes: benchflow/sandbox/exit_codes.py.
set -eu

if [ $# -ne 4 ]; then exit 64; fi  # USAGE
mount=$1
logs=$2
lock=$3
tools=$4
for p in "$mount" "$logs" "$tools"; do
    case $p in
        /?*) ;;
        *) exit 64 ;;  # USAGE
    esac
done
if ! is_root; then exit 65; fi  # NOT_ROOT

if [ -e "$mount" ]; then chown -R -h 0:0 -- "$mount"; fi
if [ "$lock" = 1 ]; then
    if [ -e "$mount" ]; then
        chmod -R go-w -- "$mount"
        chmod 0700 -- "$mount"
    fi
fi
# (fewer commands: each is a fork)
if [ -e "$tools" ] || [ -L "$tools" ]; then rm -rf -- "$tools"; fi
# shellcheck disable=SC2174  # the mode is for TOOLS itself; its parents are the image's
mkdir -p -m 0755 -- "$tools"
if [ "$lock" = 1 ]; then
    parent=${logs%/*}
    mkdir -p -- "$logs"
    chown 0:0 -- "$logs" "${parent:-/}" "$tools"
    chmod go-w -- "$logs" "${parent:-/}"
else
    chown 0:0 -- "$tools"
fi
