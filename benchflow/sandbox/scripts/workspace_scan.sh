#!/bin/sh
# workspace_scan.sh MODE WORKDIR STATE MAX_BYTES [ARG...]: what is in the workspace, for the
# per-turn record of changes (benchflow/rollout/workspace_changes.py). Run as root; values
# arrive as arguments only. `.git`, and names holding a newline or a backslash, are not
# scanned. STATE (root-only) keeps a stamp file and a copy of every file of at most
# MAX_BYTES. Few processes: between two turns this is on the critical path.
#   list   touch STATE/stamp, then print the stamp's status and every workspace file's:
#          "<size> <ctime> <inode> <path>" records ending in a NUL (the stamp's path
#          is absolute, workspace paths start with "./"). Nothing is read: a stat walk.
#   init   start STATE afresh: `list`, a "--hashes--" record, then "<sha256>  ./<path>"
#          lines of every file; keeps a copy of every file of at most MAX_BYTES.
#   turn   ARGs are workspace paths ("./<path>") whose first character says what the caller
#          found: "-" gone, "+" present and at most MAX_BYTES, "=" present and larger.
#          Prints "<sha256>  ./<path>" lines of the present ones, then per ARG
#          "--diff--\t<path>" and a NUL, then a unified diff against its copy (/dev/null
#          for a side that is absent or larger; nothing when the content is the same), and
#          takes the new copy (or drops it). Give the gone ones first.
# Exit codes: 0 ok, 2 bad arguments.
set -eu
[ $# -ge 4 ] || { echo "workspace_scan.sh: MODE WORKDIR STATE MAX_BYTES [ARG...]" >&2; exit 2; }
mode=$1 workdir=$2 state=$3 max=$4
shift 4
case $max in ''|*[!0-9]*) echo "workspace_scan.sh: MAX_BYTES is a number" >&2; exit 2 ;; esac
case $state in /?*) ;; *) echo "workspace_scan.sh: STATE must be absolute" >&2; exit 2 ;; esac
export LC_ALL=C
nl='
'
cd "$workdir"

hash_present() {  # hash_present ARG...: sha256sum of the present ones, in one process
    n=$#
    for arg; do
        case $arg in -*) ;; *) set -- "$@" "${arg#?}" ;; esac
    done
    shift "$n"
    [ $# -eq 0 ] || sha256sum -- "$@" || true  # one gone since: no line for it
}
walk() {  # walk ACTION...: every regular file below the workspace, .git and odd names left out
    find . -xdev \( -path ./.git -o -name "*$nl*" -o -name '*\\*' \) -prune -o -type f "$@"
}
status='%s %C@ %i %p\000'  # no mtime: any change to it changes the ctime

case $mode in
    list)
        [ -d "$state/copy" ] || { echo "workspace_scan.sh: no init" >&2; exit 2; }
        : > "$state/stamp"  # before the walk: a file changed after it has a newer ctime
        exec find "$state/stamp" . -xdev \( -path ./.git -o -name "*$nl*" -o -name '*\\*' \) \
            -prune -o -type f -printf "$status" ;;  # as `walk` (one process less)
    init)
        rm -rf "$state"
        mkdir -p "$state/copy"
        chmod 700 "$state"
        : > "$state/stamp"
        find "$state/stamp" -printf "$status"
        walk -printf "$status"  # the status before the content
        printf -- '--hashes--\000'
        walk -print0 | xargs -0 -r sha256sum --
        walk -size "-$((max + 1))c" -exec cp -p --parents -t "$state/copy" -- {} + ;;
    turn)
        [ -d "$state/copy" ] || { echo "workspace_scan.sh: no init" >&2; exit 2; }
        hash_present "$@"
        for arg; do
            path=${arg#?}
            copy=$state/copy/$path old=/dev/null new=/dev/null
            case $arg in [+]*) [ -f "$path" ] && [ ! -L "$path" ] && new=$path ;; esac
            [ -f "$copy" ] && old=$copy
            printf -- '--diff--\t%s\000' "${path#./}"
            [ "$old$new" = /dev/null/dev/null ] && continue
            if diff -u --label "a/${path#./}" --label "b/${path#./}" -- "$old" "$new"; then
                continue  # the same content (a file whose status alone changed)
            fi
            if [ "$new" = /dev/null ]; then
                rm -f -- "$copy"
            else
                [ ! -d "$copy" ] || rm -rf -- "$copy"  # a folder of that name before
                [ -d "${copy%/*}" ] || mkdir -p -- "${copy%/*}"
                cp -p -- "$path" "$copy" || rm -f -- "$copy"
            fi
        done ;;
    *)
        echo "workspace_scan.sh: MODE is list, init or turn" >&2
        exit 2 ;;
esac
