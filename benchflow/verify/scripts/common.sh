#!/bin/sh
# common.sh: helpers shared by the hardening scripts. benchflow prepends this text to
# baseline.sh, harden.sh and seal.sh and runs the result as `sh -c TEXT NAME ARGS...`:
# no script is read from a file the agent could have edited, and every value arrives as
# an argument. POSIX sh, because task images may have no bash.
# shellcheck disable=SC2034,SC2154  # shared names are used, and ws/base set, by the scripts
set -eu
export LC_ALL=C
path_of_image=${PATH:-}
# Tools come from root-owned system folders only. /usr/local is left out: a root agent
# could have planted a fake `find` or `sort` there.
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
umask 077
tab='	'  # a literal tab: no fork
nl='
'  # a literal newline
# Names with control characters are never parsed (a newline could forge a line); they
# are pruned from every scan and handled on their own.
cntrl='*[[:cntrl:]]*'
# Signature of an entry. ctime cannot be set from user space, so a write, chmod, chown,
# rename or replacement always changes it. Folders: only type, mode and owner (adding a
# file to a folder is not a change of the folder).
dsig='%p\td %m %U %G\n'
fsig='%p\t%y %m %U %G %s %C@ %i\n'

# The build, test and import-hook files hardening tracks in the workspace.
ws_find() {  # ws_find FIND-ACTIONS...
    find "$ws" -xdev \( -name .git -o -name node_modules -o -name "$cntrl" \) -prune -o \
        \( -name pyproject.toml -o -name setup.cfg -o -name setup.py -o -name tox.ini \
        -o -name pytest.ini -o -name .pytest.ini -o -name .coveragerc -o -name Makefile \
        -o -name makefile -o -name GNUmakefile -o -name package.json -o -name conftest.py \
        -o -name sitecustomize.py -o -name usercustomize.py -o -name '*.pth' \) "$@"
}

# (Signature lists are compared as sets, by awk: never sorted, each sort is a fork.)
ws_scan() {  # signatures of the tracked workspace files
    ws_find \( -type d -printf "$dsig" -o -printf "$fsig" \) 2>/dev/null || :
}

same_lines() {  # same_lines A B: files A and B hold the same lines (builtins: short files)
    { while :; do
        a_end=0; b_end=0
        IFS= read -r a <&3 || a_end=1
        IFS= read -r b <&4 || b_end=1
        if [ "$a_end" != "$b_end" ] || [ "$a" != "$b" ]; then return 1; fi
        if [ "$a_end" = 1 ]; then return 0; fi
    done; } 3< "$1" 4< "$2"
}

sort_u() {  # sort_u FILE...: sort each FILE in place, unique lines (no fork for 0 or 1 line)
    for f in "$@"; do
        if { IFS= read -r _ && IFS= read -r _; } < "$f"; then sort -u -o "$f" -- "$f"; fi
    done
}

sys_scan() {  # sys_scan [MARKS]: signatures of the watched system entries (roots listed in
    # $base/sys.*); with MARKS, an x is written there per name with control characters
    # made since the stamp under the Python and /etc folders (one walk for both)
    {
        # Python folders and /etc/python3*, /etc/ld.so.conf.d: everything below them.
        marks=${1:-}
        set --
        while IFS= read -r p; do
            if [ -e "$p" ]; then set -- "$@" "$p"; fi
        done < "$base/sys.tree"
        if [ $# -gt 0 ] && [ -n "$marks" ]; then
            # a new name is marked and pruned; an old one (and what is below it) is
            # walked for new ones, never printed
            find -H "$@" -xdev \( -name "$cntrl" -cnewer "$base/stamp" -prune \
                -fprintf "$marks" x \) -o -path "$cntrl" -o -type d -printf "$dsig" \
                -o -printf "$fsig" 2>/dev/null || :
        elif [ $# -gt 0 ]; then
            find -H "$@" -xdev -name "$cntrl" -prune -o -type d -printf "$dsig" \
                -o -printf "$fsig" 2>/dev/null || :
        fi
        # PATH folders: their direct entries (-H: a symlink named is followed). Single
        # entries, symlinks not followed: PATH entries as written, /etc/ld.so.preload. One
        # find for both (each find is a fork) when -H and -P and both depths see every root
        # alike: no PATH folder is a symlink (they are physical paths) and every single
        # entry is a symlink, a file or one of the PATH folders (listed already).
        set --
        flat=$nl
        one=1
        while IFS= read -r p; do
            if [ -e "$p" ]; then
                set -- "$@" "$p"
                flat="$flat$p$nl"
                if [ -L "$p" ]; then one=0; fi
            fi
        done < "$base/sys.flat"
        while IFS= read -r p; do
            case $p in *[[:cntrl:]]*) one=0 ;; esac
            if [ -d "$p" ] && [ ! -L "$p" ]; then
                case $flat in *"$nl$p$nl"*) ;; *) one=0 ;; esac
            fi
        done < "$base/sys.self"
        follow=-H
        if [ "$one" = 1 ]; then
            follow=-P  # the single entries' symlinks are not followed
            while IFS= read -r p; do
                if [ -L "$p" ] || { [ -e "$p" ] && [ ! -d "$p" ]; }; then set -- "$@" "$p"; fi
            done < "$base/sys.self"
        fi
        if [ $# -gt 0 ]; then
            find "$follow" "$@" -maxdepth 1 -xdev -name "$cntrl" -prune -o -type d \
                -printf "$dsig" -o -printf "$fsig" 2>/dev/null || :
        fi
        if [ "$one" != 1 ]; then
            set --
            while IFS= read -r p; do
                if [ -e "$p" ] || [ -L "$p" ]; then set -- "$@" "$p"; fi
            done < "$base/sys.self"
            if [ $# -gt 0 ]; then
                find "$@" -maxdepth 0 -type d -printf "$dsig" -o -printf "$fsig" 2>/dev/null || :
            fi
        fi
    }
}

plugin_dists() {  # plugin_dists FILE: the dists under the watched Python folders that
    # declare pytest11 plugins, sorted, into FILE (/etc/python3* and /etc/ld.so.conf.d,
    # which baseline.sh watches too, are on no sys.path: not searched, and without a Python
    # folder no find runs)
    plugins_out=$1
    set --
    while IFS= read -r p; do
        case ${p#/etc/} in
            "$p" | */*) ;;
            ld.so.conf.d | python3*) continue ;;
        esac
        if [ -d "$p" ]; then set -- "$@" "$p"; fi
    done < "$base/sys.tree"
    : > "$plugins_out"
    if [ $# -gt 0 ]; then
        find -H "$@" -mindepth 2 -maxdepth 2 -name entry_points.txt -path '*-info/*' \
            -exec grep -l '^\[pytest11\]' {} + 2>/dev/null > "$plugins_out" || :
    fi
    sort_u "$plugins_out"
}

top_names() {  # top_names DIR: the names directly in DIR (none with control characters), no fork
    for f in "$1"/* "$1"/.[!.]* "$1"/..?*; do
        if [ -e "$f" ] || [ -L "$f" ]; then
            case ${f##*/} in *[[:cntrl:]]*) ;; *) printf '%s\n' "${f##*/}" ;; esac
        fi
    done
}

is_root() {  # the shell's effective uid is 0 (from /proc, no fork; else `id -u`)
    if [ -r /proc/self/status ]; then
        while read -r key _ euid _; do
            if [ "$key" = Uid: ]; then [ "$euid" = 0 ]; return; fi
        done < /proc/self/status
    fi
    [ "$(id -u)" = 0 ]
}

record_procs() {  # the processes alive now, "<pid>:<start time>" per line, in $base/procs
    # (but $fold_pid: fold.sh, which runs the agent next, is killed by a later harden.sh
    # exec of its own: one it outlived because the agent killed its exec)
    : > "$base/procs"
    for d in /proc/[0-9]*; do
        if [ "${d#/proc/}" = "${fold_pid:-}" ]; then continue; fi
        if read -r line < "$d/stat" 2>/dev/null; then
            rest=${line##*) }
            # shellcheck disable=SC2086  # split the numeric fields after "(comm)"
            set -- $rest
            printf '%s:%s\n' "${d#/proc/}" "${20}" >> "$base/procs"
        fi
    done
}

digest() {  # digest BASE: the sha256 of each file baseline.sh saved, and its stamp's ctime
    # and inode, on one line (their words joined by spaces: no hash over them, no pipe; two
    # programs). Python keeps it; harden.sh compares it whole.
    # shellcheck disable=SC2046  # the words of sha256sum's and stat's output
    set -- $(
        cd "$1"
        set -- procs meta ws.sig ws.top ws.tar sys.tree sys.flat sys.self sys.sig modules plugins \
            plugins.tsv plugins.sums
        if [ -e ld.so.preload ] || [ -L ld.so.preload ]; then set -- "$@" ld.so.preload; fi
        sha256sum -- "$@"
        stat -c '%z %i' stamp
    )
    printf '%s\n' "$*"
}

unpack_into() {  # unpack_into MOUNT ARCHIVE: unpack ARCHIVE, a base64 tar of MOUNT (from /),
    # over what MOUNT holds, as an upload would. Through a pipe (no file to write and
    # remove: a broken archive fails tar); a folder tar makes is 0700 (umask 077) until
    # the archive's own mode is set.
    printf '%s' "$2" | base64 -d | tar -xpf - -C /
}

json_str() {  # json_str VALUE: print VALUE as a JSON string (control characters dropped)
    case $1 in
        *[\\\"]* | *[[:cntrl:]]*)
            printf '"%s"' "$(printf '%s' "$1" | tr -d '\000-\037' | sed 's/\\/\\\\/g; s/"/\\"/g')" ;;
        *) printf '"%s"' "$1" ;;
    esac
}

json_list() {  # json_list FILE: the lines of FILE as a JSON array of strings
    # Builtins only (a fork per list added up): json_str forks for an odd line alone.
    printf '['
    sep=
    while IFS= read -r line || [ -n "$line" ]; do
        printf '%s' "$sep"
        json_str "$line"
        sep=,
    done < "$1"
    printf ']'
}
