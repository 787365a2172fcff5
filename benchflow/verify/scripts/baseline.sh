#!/bin/sh
# baseline.sh BASE WORKSPACE PYINFO LOADER LOADER_DIR SCRUB [NAMED...]: record, as root,
# what hardening later compares against.
#
# Runs once per rollout after the agent is installed and before it starts (common.sh is
# prepended). Saves into BASE (root-only, 0700):
#   stamp      its ctime marks "before the agent": anything changed later is newer
#   procs      "pid:starttime" of every live process; any other process is the agent's
#   ws.sig     signatures of the tracked build/test/import-hook files under WORKSPACE
#   ws.tar     a copy of those files, to restore them from
#   ws.top     the names directly under WORKSPACE
#   sys.tree   Python library folders, /etc/python3*, /etc/ld.so.conf.d (watched recursively)
#   sys.flat   PATH folders, /root/.local/bin and /root/.cargo/bin (their direct entries are watched)
#   sys.self   PATH entries as written, /etc/ld.so.preload, /etc/ld.so.conf
#   sys.sig    signatures of every watched system entry
#   modules    module names a new file must not shadow; plugins: dists with pytest11 plugins
#   plugins.tsv, plugins.sums  the image's trusted pytest plugins and the sha256 of their
#              files (and of LOADER_DIR's): harden.sh reports a changed one as tampering
#   meta       key=value facts; ld.so.preload: a copy of /etc/ld.so.preload if it exists
# PYINFO is the text of pyinfo.py, LOADER that of benchflow_verifier_plugins.py, which is
# written to LOADER_DIR (root-owned, world-readable) with the plugin list it loads.
# The plugins come from every Python environment the verifier could run pytest in: each
# python on the safe PATH, the interpreter named by the `#!` line of each pytest script there
# (a venv, a uv or pipx tool environment), and the interpreters and bin folders the task
# names (NAMED: absolute paths found in its test.sh); only those whose interpreter and
# folders are root-owned and not group/other-writable. SCRUB: "" or the text of
# scrub_git.sh, run first (its output to stderr; its failure ends this script with its
# code) when WORKSPACE holds a repository: no shell of its own started otherwise.
# Prints one JSON line: the digest of
# BASE (harden.sh refuses a baseline whose digest changed), PATH and PYTHONPATH filtered to
# folders the agent cannot write (never inside the workspace), and counts.
# Exit codes: benchflow/sandbox/exit_codes.py.
# shellcheck disable=SC2154  # cntrl, dsig, fsig, tab are set in common.sh
set -eu

if [ $# -lt 6 ]; then exit 64; fi  # USAGE
base=$1
ws=$2
pyinfo=$3
loader=$4
loader_dir=$5
scrub=$6
shift 6
for p in "$base" "$loader_dir"; do
    case $p in
        /?*) ;;
        *) exit 64 ;;  # USAGE
    esac
done
if ! is_root; then exit 65; fi  # NOT_ROOT
if [ -n "$scrub" ] && [ "$ws" != / ] && [ -d "$ws/.git" ] && [ ! -L "$ws/.git" ]; then
    sh -c "$scrub" scrub_git "$ws" >&2 || exit
fi

# resolve DIR: sets $resolved to DIR's physical path (no fork); fails if DIR is no folder.
resolve() {
    case $1 in /*) ;; *) return 1 ;; esac
    cd -P -- "$1" 2>/dev/null || return 1
    resolved=$PWD
    cd /
}

# unsafe_dirs DIR...: print those of the DIRs (absolute) and the folders above them that
# are not root-owned or are group/other-writable (one find for all of them; a symlink is
# judged as itself, as lstat sees it: mode 777, so unsafe). With unsafe_gnu=1 the find
# uses GNU find's -maxdepth and -printf and its status is returned: the first call tells
# whether find is GNU's (one find fewer than a test of its own).
unsafe_gnu=0
unsafe_dirs() {
    seen=$nl
    for d in "$@"; do
        shift
        while :; do
            case $seen in *"$nl$d$nl"*) break ;; esac  # its parents are in too
            seen="$seen$d$nl"
            set -- "$@" "$d"
            if [ "$d" = / ]; then break; fi
            d=${d%/*}
            d=${d:-/}
        done
    done
    if [ $# -eq 0 ]; then return 0; fi
    if [ "$unsafe_gnu" = 1 ]; then
        find "$@" -maxdepth 0 \( ! -user 0 -o -perm -020 -o -perm -002 \) -printf '%p\n' \
            2>/dev/null
    else
        find "$@" -prune \( ! -user 0 -o -perm -020 -o -perm -002 \) -print 2>/dev/null || :
    fi
}

# resolve_all DIR...: the physical path of each DIR that is a folder, one per line.
resolve_all() {
    for p in "$@"; do
        if resolve "$p"; then printf '%s\n' "$resolved"; fi
    done
}

# is_safe DIR: DIR's physical path and the folders above it are all outside $unsafe.
is_safe() {
    resolve "$1" || return 1
    d=$resolved
    while :; do
        case $unsafe in *"$nl$d$nl"*) return 1 ;; esac
        if [ "$d" = / ]; then return 0; fi
        d=${d%/*}
        d=${d:-/}
    done
}

# in_ws DIR: DIR is the workspace or below it.
in_ws() {
    if [ "$has_ws" != 1 ]; then return 1; fi
    case $1 in "$ws" | "$ws"/*) return 0 ;; esac
    return 1
}

if [ -e "$base" ] || [ -L "$base" ]; then rm -rf -- "$base"; fi  # (each command is a fork)
mkdir -p -- "$base" "$base/out"  # 0700: umask 077; out: harden.sh's scratch files
: > "$base/stamp"
# The interpreters, scripts and bin folders the task names (absolute, one line each).
: > "$base/named"
for p in "$@"; do
    case $p in /*[[:cntrl:]]*) ;; /?*) printf '%s\n' "$p" >> "$base/named" ;; esac
done

# Processes alive now: harden.sh kills every other one (and all of the agent user's).
record_procs

has_ws=0
case $ws in
    / | '' | *[[:cntrl:]]*) ;;  # none, or a name that scans could not parse
    /*) if [ -d "$ws" ] && [ ! -L "$ws" ]; then has_ws=1; fi ;;
esac

# PATH and PYTHONPATH as the image sets them, keeping only folders the agent cannot write
# (PYTHONPATH may also keep the workspace: the code under test lives there anyway).
old_ifs=$IFS
# Every folder named in PATH or PYTHONPATH and its parents, checked with one stat.
set -f
IFS=:
# shellcheck disable=SC2086  # split PATH and PYTHONPATH on ':'
set -- $path_of_image ${PYTHONPATH:-}
IFS=$old_ifs
set +f
resolve_all "$@" > "$base/dirs"
set --
while IFS= read -r d; do set -- "$@" "$d"; done < "$base/dirs"
# GNU find (its -printf lists every scan): told by this first find when it succeeds, else
# by a test of its own (no GNU find, or a folder gone meanwhile)
gnu=0
unsafe_gnu=1
if [ $# -gt 0 ] && found=$(unsafe_dirs "$@"); then
    gnu=1
else
    if find / -maxdepth 0 -printf '' >/dev/null 2>&1; then gnu=1; fi
    unsafe_gnu=0
    found=$(unsafe_dirs "$@")
fi
unsafe_gnu=0
unsafe="$nl$found$nl"
safe_path=
: > "$base/sys.flat"
flat_seen=$nl
# add_flat DIR: DIR into sys.flat once (a string of those added: no sort, no fork)
add_flat() {
    case $flat_seen in *"$nl$1$nl"*) return 0 ;; esac
    flat_seen="$flat_seen$1$nl"
    printf '%s\n' "$1" >> "$base/sys.flat"
}
: > "$base/sys.self"
set -f
IFS=:
for p in $path_of_image; do
    IFS=$old_ifs
    # A folder in the workspace (/app/bin) is the agent's, whoever owns it now.
    if is_safe "$p" && ! in_ws "$resolved" && ! in_ws "$p"; then
        case ":$safe_path:" in
            *":$p:"*) ;;
            *)
                safe_path=${safe_path:+$safe_path:}$p
                printf '%s\n' "$p" >> "$base/sys.self"
                add_flat "$resolved"
                ;;
        esac
    fi
done
IFS=$old_ifs
# root's own bin folders, where uv's installer puts uv, uvx and the `env` file that
# Terminal-Bench 2's test.sh sources (`source $HOME/.local/bin/env`, HOME=/root when the
# verifier runs): watched like PATH folders even when absent, so that a uv, uvx or env a
# root agent plants there is removed and a changed one is tampering.
for p in /root/.local/bin /root/.cargo/bin; do
    if resolve "$p"; then p=$resolved; fi
    add_flat "$p"
done
safe_pythonpath=
sys_pythonpath=  # the entries outside the workspace: where image plugins may live
: > "$base/sys.tree"
IFS=:
for p in ${PYTHONPATH:-}; do
    IFS=$old_ifs
    if in_ws "$p"; then
        safe_pythonpath=${safe_pythonpath:+$safe_pythonpath:}$p
    elif is_safe "$p"; then
        safe_pythonpath=${safe_pythonpath:+$safe_pythonpath:}$p
        sys_pythonpath=${sys_pythonpath:+$sys_pythonpath:}$p
        printf '%s\n' "$p" >> "$base/sys.tree"
    fi
done
IFS=$old_ifs
set +f

# The interpreters whose pytest plugins the verifier may load: every python on the safe
# PATH, the interpreter of every pytest script there (a venv's, a uv or pipx tool
# environment's), and those of the interpreters, scripts and bin folders the task names.
# shebang FILE: print the interpreter FILE's `#!` line names (pip's `'''exec'` form too).
shebang() {
    first='' second=''
    # at most 1 KiB: a script's first two lines, never a whole binary
    { IFS= read -r first && IFS= read -r second; } <<EOF || :
$(head -c 1024 -- "$1" 2>/dev/null | tr -d '\000')
EOF
    case $first in
        '#!/bin/sh'*)
            case $second in
                "'''exec' \""*) second=${second#"'''exec' \""}; printf '%s\n' "${second%%\"*}" ;;
            esac ;;
        '#!'*)
            first=${first#??}
            first=${first#"${first%%[! ]*}"}
            printf '%s\n' "${first%% *}" ;;
    esac
}
# candidates DIR: the pythons in DIR and the interpreters of its pytest scripts.
candidates() {
    for f in "$1"/python "$1"/python3 "$1"/python3.[0-9] "$1"/python3.[0-9][0-9] \
        "$1"/pytest "$1"/pytest[!a-z]* "$1"/py.test "$1"/py.test[!a-z]*; do
        if [ ! -f "$f" ] || [ ! -x "$f" ]; then continue; fi
        case ${f##*/} in
            python*) printf '%s\n' "$f" ;;
            *) shebang "$f" ;;
        esac
    done
}
: > "$base/interps.cand"
set -f
IFS=:
for dir in $safe_path; do
    IFS=$old_ifs
    set +f
    candidates "$dir" >> "$base/interps.cand"
    set -f
done
IFS=$old_ifs
set +f
while IFS= read -r p; do
    if [ -d "$p" ]; then
        candidates "$p"
    else
        case ${p##*/} in
            python*) printf '%s\n' "$p" ;;
            *) if [ -f "$p" ]; then shebang "$p"; fi ;;
        esac
    fi
done < "$base/named" >> "$base/interps.cand"
# Keep those that exist, root-owned and not group/other-writable, in folders (theirs and
# their target's) that are too, and outside the workspace; one per environment (its bin
# folder and the binary it runs: python3 and python3.11 are one), in order.
: > "$base/interps"
interps_seen=$nl  # "bin folder<TAB>binary" of each kept so far (a string: no fork per test)
while IFS= read -r p; do
    case $p in /*[[:cntrl:]]*) continue ;; /?*) ;; *) continue ;; esac
    case ${p##*/} in python*) ;; *) continue ;; esac  # not `env`: its python is on PATH
    if [ ! -f "$p" ] || [ ! -x "$p" ]; then continue; fi
    real=$(readlink -f -- "$p") || continue
    case $interps_seen in *"$nl${p%/*}$tab$real$nl"*) continue ;; esac
    interps_seen="$interps_seen${p%/*}$tab$real$nl"
    # shellcheck disable=SC2046  # split stat's two fields
    set -- $(stat -L -c '%u %a' -- "$p" 2>/dev/null)
    if [ "${1:-1}" != 0 ] || [ $((0${2:-2} & 18)) -ne 0 ]; then continue; fi
    if [ -n "$(unsafe_dirs "${p%/*}" "${real%/*}")" ]; then continue; fi
    if in_ws "$real" || in_ws "$p"; then continue; fi
    printf '%s\n' "$p" >> "$base/interps"
done < "$base/interps.cand"
python=
read -r python < "$base/interps" || :
# The test runner and what it imports at startup (pytest's dependencies, the import hooks of
# uv- and virtualenv-made environments): a new workspace module with one of these names
# would run inside the verifier when the workspace is on PYTHONPATH, even in an environment
# uvx builds at verify time.
printf '%s\n' _distutils_hack _pytest _virtualenv benchflow_verifier_plugins colorama \
    exceptiongroup iniconfig packaging pluggy py pygments pytest sitecustomize tomli \
    usercustomize > "$base/modules"  # sorted: sorted again only when interpreters add names
: > "$base/plugins.tsv"
: > "$base/plugins.sums"
while IFS= read -r py; do
    # Its answer is appended once it is complete (a Python 2 cannot run pyinfo: nothing).
    "$py" -I -S -c "$pyinfo" "$base/sys.tree" "$base/modules" "$base/plugins.tsv" \
        "$base/plugins.sums" "$sys_pythonpath" < /dev/null 2>/dev/null || :
    # Its bin folder's commands are watched like a PATH folder's.
    if resolve "${py%/*}"; then add_flat "$resolved"; fi
done < "$base/interps"
# (sorting, filtering and counting skipped when empty: each command is a fork)
sort_u "$base/plugins.tsv" "$base/plugins.sums"
# The loader pytest imports with -p, and the plugins it may load (module<TAB>site folder),
# made world-readable (folder 0755, files 0644) by the umask they are created with.
if [ -e "$loader_dir" ] || [ -L "$loader_dir" ]; then rm -rf -- "$loader_dir"; fi
umask 022
mkdir -p -- "$loader_dir"  # 0755: just removed, so made anew with this umask
printf '%s\n' "$loader" > "$loader_dir/benchflow_verifier_plugins.py"
: > "$loader_dir/plugins.txt"
if [ -s "$base/plugins.tsv" ]; then
    grep -v '^!' "$base/plugins.tsv" | cut -f1,2 > "$loader_dir/plugins.txt" || :
fi
umask 077
sha256sum -- "$loader_dir/benchflow_verifier_plugins.py" "$loader_dir/plugins.txt" \
    >> "$base/plugins.sums"
for p in /etc/python3*; do
    if [ -d "$p" ]; then printf '%s\n' "$p" >> "$base/sys.tree"; fi
done
printf '%s\n' /etc/ld.so.conf.d >> "$base/sys.tree"
printf '%s\n' /etc/ld.so.preload /etc/ld.so.conf >> "$base/sys.self"
if [ -s "$base/interps" ]; then sort_u "$base/modules"; fi
sort_u "$base/sys.tree"

: > "$base/ws.sig"
: > "$base/ws.top"
: > "$base/ws.list"
: > "$base/sys.sig"
: > "$base/plugins"
if [ "$gnu" = 1 ]; then
    if [ "$has_ws" = 1 ]; then
        # the signatures, and in the same walk the list ws.tar copies (tar drops the
        # leading /, as it always did)
        ws_find \( -type d -printf "$dsig" -o -printf "$fsig" \) -fprint "$base/ws.list" \
            2>/dev/null > "$base/ws.sig" || :
        top_names "$ws" > "$base/ws.top"
    fi
    sys_scan > "$base/sys.sig"
    # pytest11 entry points: recorded so the report can name plugins the agent added.
    plugin_dists "$base/plugins"
fi
if [ -s "$base/ws.list" ]; then
    tar -cf "$base/ws.tar" --no-recursion --no-unquote -C / -T "$base/ws.list" 2>/dev/null \
        || tar -cf "$base/ws.tar" -C / -T "$base/ws.list"
else
    : > "$base/ws.tar"  # nothing to restore from
fi

ld_preload=absent
if [ -e /etc/ld.so.preload ] || [ -L /etc/ld.so.preload ]; then
    cp -P -p /etc/ld.so.preload "$base/ld.so.preload"
    ld_preload=present
fi
{
    printf 'workspace=%s\n' "$ws"
    printf 'has_ws=%s\n' "$has_ws"
    printf 'gnu=%s\n' "$gnu"
    printf 'ld_preload=%s\n' "$ld_preload"
} > "$base/meta"

supported=false
if [ "$gnu" = 1 ]; then supported=true; fi
workspace=false
if [ "$has_ws" = 1 ]; then workspace=true; fi
printf '{"digest":"%s","supported":%s,"workspace":%s,"path":' "$(digest "$base")" \
    "$supported" "$workspace"
json_str "$safe_path"
printf ',"pythonpath":'
json_str "$safe_pythonpath"
printf ',"python":'
json_str "$python"
printf ',"interpreters":'
json_list "$base/interps"
printf ',"watched_dirs":'
json_list "$base/sys.tree"
# shellcheck disable=SC2046  # the counts in wc's first column
set -- $(wc -l "$base/ws.sig" "$base/sys.sig" "$base/procs")
printf ',"n_workspace_files":%s,"n_system_entries":%s,"n_processes":%s,"pytest_plugin_dists":' \
    "$1" "$3" "$5"
json_list "$base/plugins"
: > "$base/plugins.loaded"
: > "$base/plugins.untrusted"
if [ -s "$base/plugins.tsv" ]; then
    grep -v '^!' "$base/plugins.tsv" | cut -f1 | sort -u > "$base/plugins.loaded" || :
    grep '^!' "$base/plugins.tsv" | cut -f2,3 | tr '\t' ' ' > "$base/plugins.untrusted" || :
fi
printf ',"pytest_plugins":'
json_list "$base/plugins.loaded"
printf ',"pytest_plugins_untrusted":'
json_list "$base/plugins.untrusted"
# (the scratch files, plugins.loaded ... ws.list, stay: root-only, in no digest, and an rm
# is a fork; the next baseline removes BASE whole)
printf '}\n'
