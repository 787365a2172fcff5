#!/bin/sh
# skills.sh: stage skills inside the sandbox and place a session's skills for its agent.
# Values arrive as arguments only. Run as root.
#   skills.sh stage SRC STAGE   copy each SRC/<name>/ holding a SKILL.md to STAGE/<name>/
#                               (replacing it); prints the staged names, one a line
#   skills.sh seal DIR          make DIR root-owned and read-only for everyone else
#   skills.sh place STAGE TARGET NAME...
#                               make TARGET hold exactly STAGE/<NAME>/ for each NAME,
#                               root-owned and read-only for everyone else
# Exit codes: 0 ok, 2 bad arguments, 4 a named skill is not staged.
set -eu
cmd=${1:-}
case $cmd in
stage)
    [ $# -eq 3 ] || { echo "usage: skills.sh stage SRC STAGE" >&2; exit 2; }
    src=$2 stage=$3
    mkdir -p "$stage"
    [ -d "$src" ] || exit 0
    for skill in "$src"/*/; do
        [ -f "${skill}SKILL.md" ] || continue
        name=$(basename "$skill")
        rm -rf "${stage:?}/$name"
        cp -R "$skill" "$stage/$name"
        echo "$name"
    done
    chown -R 0:0 "$stage"
    chmod -R a+rX,go-w "$stage"
    ;;
seal)
    [ $# -eq 2 ] || { echo "usage: skills.sh seal DIR" >&2; exit 2; }
    chown -R 0:0 "$2"
    chmod -R a+rX,go-w "$2"
    ;;
place)
    [ $# -ge 3 ] || { echo "usage: skills.sh place STAGE TARGET NAME..." >&2; exit 2; }
    stage=$2 target=$3
    shift 3
    rm -rf "${target:?}"
    mkdir -p "$target"
    for name in "$@"; do
        [ -d "$stage/$name" ] || { echo "skills.sh: skill $name is not staged" >&2; exit 4; }
        cp -R "$stage/$name" "$target/$name"
    done
    chown -R 0:0 "$target"
    chmod -R a+rX,go-w "$target"
    ;;
*)
    echo "usage: skills.sh stage|seal|place ..." >&2
    exit 2
    ;;
esac
