#!/bin/sh
# workspace_scan.sh MODE WORKDIR STATE MAX_BYTES: what is in the workspace, for the per-turn
# record of changes (benchflow/rollout/workspace_changes.py), in one exec. Run as root;
# values arrive as arguments only. `.git`, and names holding a newline, are not scanned.
# STATE (root-only) keeps the last manifest and a copy of every file of at most MAX_BYTES.
#   init   record the workspace: the manifest and the copies; print the manifest.
#   turn   print the manifest, then a unified diff of every file whose content changed
#          since the last call (against its copy; /dev/null for a side that is absent or
#          over MAX_BYTES), and take the new state.
# Output: "<sha256>  ./<path>" lines, a line "--sizes--", "<size>\t<path>" lines, then per
# changed file "--diff--\t<path>" and a NUL, then the diff.
# Exit codes: 0 ok, 2 bad arguments.
set -eu
[ $# -eq 4 ] || { echo "workspace_scan.sh: MODE WORKDIR STATE MAX_BYTES" >&2; exit 2; }
mode=$1 workdir=$2 state=$3 max=$4
case $max in ''|*[!0-9]*) echo "workspace_scan.sh: MAX_BYTES is a number" >&2; exit 2 ;; esac
case $state in /?*) ;; *) echo "workspace_scan.sh: STATE must be absolute" >&2; exit 2 ;; esac
export LC_ALL=C
nl='
'
tab=$(printf '\t')
cd "$workdir"

files() {  # files ACTION...: every regular file below the workspace, .git left out
    find . -xdev \( -path ./.git -o -name "*$nl*" \) -prune -o -type f "$@"
}

scan() {  # the manifest: hashes to $state/new (sorted by path) and stdout, then sizes
    files -print0 | xargs -0 -r sha256sum -- | sort -k2 > "$state/new"
    cat "$state/new"
    echo "--sizes--"
    files -printf '%s\t%P\n'
}

case $mode in
    init)
        rm -rf "$state"
        mkdir -p "$state/copy"
        chmod 700 "$state"
        files -size "-$((max + 1))c" -exec cp -p --parents -t "$state/copy" -- {} +
        scan
        mv "$state/new" "$state/manifest" ;;
    turn)
        [ -d "$state/copy" ] || { echo "workspace_scan.sh: no init" >&2; exit 2; }
        scan
        # paths whose line changed: created, modified or deleted
        comm -3 "$state/manifest" "$state/new" | sed "s/^$tab//" | cut -c67- | sort -u |
            while IFS= read -r path; do
                path=${path#./}
                printf -- '--diff--\t%s\000' "$path"
                old=/dev/null new=/dev/null
                [ -f "$state/copy/$path" ] && old=$state/copy/$path
                if [ -f "$path" ] && [ ! -L "$path" ] &&
                    [ "$(stat -c %s -- "$path")" -le "$max" ]; then
                    new=$path
                fi
                diff -u --label "a/$path" --label "b/$path" -- "$old" "$new" || true
                rm -f -- "$state/copy/$path"
                if [ "$new" != /dev/null ]; then
                    mkdir -p -- "$(dirname -- "$state/copy/$path")"
                    cp -p -- "$path" "$state/copy/$path"
                fi
            done
        mv "$state/new" "$state/manifest" ;;
    *)
        echo "workspace_scan.sh: MODE is init or turn" >&2
        exit 2 ;;
esac
