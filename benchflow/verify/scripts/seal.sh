#!/bin/sh
# seal.sh MOUNT LOGS LOCK TOOLS RESET WORKSPACE: after the verifier upload, make the verifier
# folder root's (common.sh is prepended). In the exec that starts test.sh, so that nothing
# can be planted between the seal and test.sh.
#   MOUNT      the verifier folder; always chowned to root (an upload keeps the host's uid,
#              which may be the agent's inside the sandbox)
#   LOGS       /logs/verifier
#   LOCK       1: MOUNT becomes root-only (0700), LOGS root's, and LOGS's parent unwritable by
#              others, so that nobody but root can replace LOGS
#   TOOLS      where uv and pip build the verifier's tools (verifier_env.tool_env): deleted
#              and recreated empty, root-owned 0755, whatever was there (only root can write it)
#   RESET      "" or a mode (755): LOGS is emptied and recreated root-owned with that mode, so
#              that reward files written before this moment never count ("": the exec's
#              launch of test.sh does it, runner.verifier_argv)
#   WORKSPACE  "" or the workspace to lock as lock_workspace.sh does (root's, unwritable by
#              anyone else), in the same chown and chmod as MOUNT
# Exit codes: benchflow/sandbox/exit_codes.py.
set -eu

if [ $# -ne 6 ]; then exit 64; fi  # USAGE
mount=$1
logs=$2
lock=$3
tools=$4
reset=$5
ws=$6
for p in "$mount" "$logs" "$tools"; do
    case $p in
        /?*) ;;
        *) exit 64 ;;  # USAGE
    esac
done
case $reset in '' | [0-7][0-7][0-7]) ;; *) exit 64 ;; esac  # USAGE
case $ws in
    '') ;;
    / | //*) exit 64 ;;  # USAGE
    /?*) ;;
    *) exit 64 ;;  # USAGE
esac
if ! is_root; then exit 65; fi  # NOT_ROOT

# (fewer commands: each is a fork; MOUNT and the workspace share each chown and chmod)
set --
if [ -e "$mount" ]; then set -- "$mount"; fi
if [ -n "$ws" ] && [ -d "$ws" ]; then set -- "$@" "$ws"; fi
if [ $# -gt 0 ]; then chown -R -h 0:0 -- "$@"; fi
if [ "$lock" = 1 ]; then
    # symlinks are never followed (-h above; chmod skips them under -R when not given)
    if [ $# -gt 0 ]; then chmod -R go-w -- "$@"; fi
    if [ -e "$mount" ]; then chmod 0700 -- "$mount"; fi
elif [ -n "$ws" ] && [ -d "$ws" ]; then
    chmod -R go-w -- "$ws"
fi
set --
if [ -e "$tools" ] || [ -L "$tools" ]; then set -- "$tools"; fi
if [ -n "$reset" ]; then
    if ! rm -rf -- "$@" "$logs" 2>/dev/null; then
        # A process left writing into LOGS (nothing killed) can make rm fail ("Directory not
        # empty"): LOGS is renamed away whole, atomically, and removed as far as it goes.
        if [ $# -gt 0 ]; then rm -rf -- "$tools"; fi
        stale=${logs%/*}/.verifier-stale-$$
        mv -- "$logs" "$stale"
        rm -rf -- "$stale" 2>/dev/null || :
    fi
elif [ $# -gt 0 ]; then
    rm -rf -- "$tools"
fi
# shellcheck disable=SC2174  # the mode is for TOOLS and LOGS; their parents are the image's
if [ "$reset" = 755 ]; then
    mkdir -p -m 0755 -- "$tools" "$logs"
else
    mkdir -p -m 0755 -- "$tools"
    if [ -n "$reset" ]; then mkdir -p -m "$reset" -- "$logs"; fi
fi
if [ "$lock" = 1 ]; then
    parent=${logs%/*}
    if [ -z "$reset" ]; then mkdir -p -- "$logs"; fi
    chown 0:0 -- "$logs" "${parent:-/}" "$tools"
    if [ -n "$reset" ]; then  # LOGS is new, with RESET's mode
        chmod go-w -- "${parent:-/}"
    else
        chmod go-w -- "$logs" "${parent:-/}"
    fi
else
    chown 0:0 -- "$tools"
fi
