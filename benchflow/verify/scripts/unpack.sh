#!/bin/sh
# unpack.sh MOUNT ARCHIVE: put the verifier folder MOUNT in place from ARCHIVE, a base64 tar
# of it (from /), over what MOUNT holds (as an upload would), in the exec that then starts
# test.sh (common.sh is prepended): the folder travels as an argument instead of an upload
# of its own. Exits NO_TOOLS when the
# image has no base64 or tar (the caller uploads the folder instead).
# Exit codes: benchflow/sandbox/exit_codes.py.
set -eu

if [ $# -ne 2 ]; then exit 64; fi  # USAGE
case $1 in
    / | '') exit 64 ;;  # USAGE
    /?*) ;;
    *) exit 64 ;;  # USAGE
esac
if ! command -v base64 >/dev/null 2>&1 || ! command -v tar >/dev/null 2>&1; then
    exit 69  # NO_TOOLS
fi
unpack_into "$1" "$2"
