#!/bin/sh
# scrub_git.sh WORKSPACE: before the agent starts, keep only the history of the workspace
# repository's HEAD (common.sh is prepended). Every other ref (branches, tags, remotes,
# stash, notes, replace refs) is deleted, reflogs are expired, the repository is repacked
# without unreachable objects or alternates, and loose unreachable objects are pruned, so a
# fix committed later, on another branch or left in the reflog cannot be read back.
# Ownership of .git is kept. Prints one JSON line.
# Exit codes: benchflow/sandbox/exit_codes.py.
set -eu

if [ $# -ne 1 ]; then exit 64; fi  # USAGE
ws=$1
case $ws in
    /?*) ;;
    *) exit 64 ;;  # USAGE
esac
if ! is_root; then exit 65; fi  # NOT_ROOT

skip() {
    printf '{"scrubbed":false,"reason":'
    json_str "$1"
    printf '}\n'
    exit 0
}
if [ ! -d "$ws/.git" ] || [ -L "$ws/.git" ]; then skip "no repository at the workspace root"; fi
if ! command -v git >/dev/null 2>&1; then skip "git is not installed"; fi
owner=$(stat -c '%u:%g' -- "$ws/.git")
g() { git -c safe.directory="$ws" -C "$ws" "$@"; }
if ! g rev-parse --verify -q HEAD >/dev/null; then skip "the repository has no commit"; fi

keep=$(g symbolic-ref -q HEAD || :)
deleted=0
g for-each-ref --format='%(refname)' > "$ws/.git/bf-refs"
while IFS= read -r ref; do
    if [ "$ref" != "$keep" ]; then
        g update-ref -d "$ref"
        deleted=$((deleted + 1))
    fi
done < "$ws/.git/bf-refs"
rm -f -- "$ws/.git/bf-refs" "$ws/.git/ORIG_HEAD" "$ws/.git/FETCH_HEAD" "$ws/.git/MERGE_HEAD" \
    "$ws/.git/CHERRY_PICK_HEAD" "$ws/.git/REVERT_HEAD"
g reflog expire --expire=now --expire-unreachable=now --all
g repack -a -d -q
rm -f -- "$ws/.git/objects/info/alternates"
g prune --expire=now
chown -R -h "$owner" -- "$ws/.git"
printf '{"scrubbed":true,"refs_deleted":%s}\n' "$deleted"
