#!/bin/sh
# workspace_scan.sh MODE WORKDIR SHADOW MAX_BYTES [PATH...]: what is in the workspace, for the
# per-turn record of changes (benchflow/rollout/workspace_changes.py). Run as root; values
# arrive as arguments only. `.git` is not scanned.
#   manifest       print "<sha256>  ./<path>" then a line "--sizes--" then "<size>\t<path>",
#                  NUL-terminated, for every regular file.
#   init           the same, after saving a copy of every file of at most MAX_BYTES in
#                  SHADOW (root-only): the previous version of what the next turn changes.
#   diff PATH...   for each PATH (workspace-relative): a line "--diff--\t<PATH>" (NUL-
#                  terminated), then `diff -u` of its SHADOW copy against the workspace's
#                  (/dev/null for a side that is absent or over MAX_BYTES); then SHADOW
#                  takes the new version.
# Exit codes: 0 ok, 2 bad arguments.
set -eu
[ $# -ge 4 ] || { echo "workspace_scan.sh: MODE WORKDIR SHADOW MAX_BYTES" >&2; exit 2; }
mode=$1 workdir=$2 shadow=$3 max=$4
shift 4
case $max in ''|*[!0-9]*) echo "workspace_scan.sh: MAX_BYTES is a number" >&2; exit 2 ;; esac
cd "$workdir"

files() {  # files ACTION...: every regular file below the workspace, .git left out
    find . -xdev -path ./.git -prune -o -type f "$@"
}

manifest() {
    files -print0 | xargs -0 -r sha256sum -z --
    printf -- '--sizes--\0'
    files -printf '%s\t%P\0'
}

case $mode in
    init)
        rm -rf "$shadow"
        mkdir -p "$shadow"
        chmod 700 "$shadow"
        files -size "-$((max + 1))c" -exec cp -p --parents -t "$shadow" -- {} +
        manifest ;;
    manifest)
        manifest ;;
    diff)
        for path in "$@"; do
            case $path in /*|../*|*/../*) continue ;; esac
            printf -- '--diff--\t%s\0' "$path"
            old=/dev/null new=/dev/null
            [ -f "$shadow/$path" ] && old=$shadow/$path
            if [ -f "$path" ] && [ ! -L "$path" ] && [ "$(stat -c %s -- "$path")" -le "$max" ]; then
                new=$path
            fi
            diff -u --label "a/$path" --label "b/$path" -- "$old" "$new" || true
            rm -f -- "$shadow/$path"
            if [ "$new" != /dev/null ]; then
                mkdir -p -- "$(dirname -- "$shadow/$path")"
                cp -p -- "$path" "$shadow/$path"
            fi
        done ;;
    *)
        echo "workspace_scan.sh: MODE is init, manifest or diff" >&2
        exit 2 ;;
esac
