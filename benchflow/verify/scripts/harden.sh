#!/bin/sh
# harden.sh BASE DIGEST WORKSPACE AGENT_USER STEPS MOUNT [PROTECTED...]
#
# Runs as root after the agent's last turn and before the final verifier (common.sh is
# prepended). Compares the sandbox with the baseline in BASE and puts it back:
#   k  kill the agent user's processes and every process started after the baseline
#   r  restore tracked workspace files (pyproject.toml, conftest.py, ...) that changed
#   i  remove files the agent added to hijack the verifier: pytest.ini, sitecustomize.py,
#      usercustomize.py, *.pth, new .pyc files, modules shadowing the standard library or
#      pytest, symlinks into PROTECTED folders, Python files left in /tmp
#   c  remove conftest.py files the agent added
#   s  system integrity: new import hooks, shadowing modules and commands in the Python and
#      PATH folders are removed, /etc/ld.so.preload is put back; any other change to an
#      entry that existed is tampering and is reported, never repaired
# Always: the files of the image's pytest plugins (plugins.sums) must be unchanged, or it
# is tampering (the verifier loads them).
# STEPS holds the letters of the steps to run. MOUNT (the verifier folder) is emptied for a
# fresh upload. AGENT_USER "" means the agent ran as root. Prints one JSON line:
# {"killed", "survivors", "restored", "removed", "tampered", "notes"}.
# Exit codes: benchflow/sandbox/exit_codes.py.
# shellcheck disable=SC2154  # cntrl, dsig, fsig, tab are set in common.sh
set -eu

if [ $# -lt 6 ]; then exit 64; fi  # USAGE
base=$1
want_digest=$2
ws=$3
agent_user=$4
steps=$5
mount=$6
shift 6
for p in "$base" "$mount" "$@"; do
    case $p in
        /?*) ;;
        *) exit 64 ;;  # USAGE
    esac
done
case $ws/ in
    "$mount"/*) exit 64 ;;  # USAGE: emptying the verifier folder would delete the workspace
esac
case $mount/ in
    "$ws"/*) if [ "$ws" != / ]; then exit 64; fi ;;  # USAGE: the verifier folder is in the workspace
esac
if ! is_root; then exit 65; fi  # NOT_ROOT
if [ ! -f "$base/meta" ]; then exit 66; fi  # NO_BASELINE
if [ "$(digest "$base")" != "$want_digest" ]; then exit 67; fi  # BASELINE_TAMPERED

# Scratch files: baseline.sh made the folder (each command is a fork); every file read
# below is written first in this run, so nothing left there by an earlier one counts.
out=$base/out
if [ -L "$out" ] || [ ! -d "$out" ]; then rm -rf -- "$out"; mkdir -p -- "$out"; fi
for f in restored removed tampered notes cntrl.sys sys.check; do : > "$out/$f"; done
note() { printf '%s\n' "$*" >> "$out/notes"; }
has() { case $steps in *"$1"*) return 0 ;; esac; return 1; }
add() { printf '%s\n' "$2" >> "$out/$1"; }
has_ws=0
gnu=0
while IFS='=' read -r key value; do  # meta's facts (builtins: no fork)
    case $key in
        has_ws) has_ws=$value ;;
        gnu) gnu=$value ;;
    esac
done < "$base/meta"

# ---- k: processes --------------------------------------------------------------------
agent_uid=-1
if [ -n "$agent_user" ]; then
    if uid=$(id -u -- "$agent_user" 2>/dev/null); then
        if [ "$uid" != 0 ]; then agent_uid=$uid; fi
    else
        note "agent user not found; killed only processes started after the baseline"
    fi
fi
# This script and its parents (the exec, a `timeout` wrapper) are never killed.
keep=" 1 "
p=$$
while [ "$p" -gt 1 ]; do
    keep="$keep$p "
    ppid=
    while read -r key value; do
        if [ "$key" = PPid: ]; then ppid=$value; break; fi
    done < "/proc/$p/status"
    p=${ppid:-1}
done
base_procs=" "
while IFS= read -r line; do base_procs="$base_procs$line "; done < "$base/procs"

# agent_proc PID: the process is the agent's (sets $state). Builtins only: a forked helper
# would itself be a process started after the baseline.
agent_proc() {
    case $keep in *" $1 "*) return 1 ;; esac
    read -r line < "/proc/$1/stat" 2>/dev/null || return 1
    rest=${line##*) }
    # shellcheck disable=SC2086  # split the numeric fields after "(comm)"
    set -- "$1" $rest
    state=$2
    if [ "$state" = Z ] || [ "$state" = X ]; then return 1; fi
    case $base_procs in *" $1:${21} "*) ;; *) return 0 ;; esac
    if [ "$agent_uid" -ge 0 ]; then
        while read -r key real eff _; do
            if [ "$key" = Uid: ]; then
                if [ "$real" = "$agent_uid" ] || [ "$eff" = "$agent_uid" ]; then return 0; fi
                return 1
            fi
        done < "/proc/$1/status" 2>/dev/null || return 1
    fi
    return 1
}

killed=0
survivors=0
if has k; then
    # Freeze first, until a pass finds nothing left running: a frozen process cannot fork.
    round=0
    while [ "$round" -lt 50 ]; do
        round=$((round + 1))
        frozen=0
        for d in /proc/[0-9]*; do
            pid=${d#/proc/}
            if agent_proc "$pid" && [ "$state" != T ] && [ "$state" != t ]; then
                if kill -STOP "$pid" 2>/dev/null; then frozen=$((frozen + 1)); fi
            fi
        done
        if [ "$frozen" -eq 0 ]; then break; fi
    done
    # Then kill, twice.
    for pass in 1 2; do
        for d in /proc/[0-9]*; do
            pid=${d#/proc/}
            if agent_proc "$pid"; then
                if kill -KILL "$pid" 2>/dev/null && [ "$pass" = 1 ]; then killed=$((killed + 1)); fi
            fi
        done
    done
    tries=0
    while :; do
        survivors=0
        for d in /proc/[0-9]*; do
            if agent_proc "${d#/proc/}"; then survivors=$((survivors + 1)); fi
        done
        if [ "$survivors" -eq 0 ] || [ "$tries" -ge 40 ]; then break; fi
        tries=$((tries + 1))
        sleep 0.05
    done
fi

if [ "$gnu" != 1 ] && { has r || has i || has c || has s; }; then
    note "no GNU find in this image: workspace restore, injected-file removal and the integrity check did not run"
fi

# ---- r, i, c: the workspace ------------------------------------------------------------
restore_ws() {  # restore_ws PATH: put PATH back from ws.tar, never through a symlink
    rel=${1#"$ws"/}
    cur=$ws
    while :; do
        case $rel in */*) ;; *) break ;; esac
        cur=$cur/${rel%%/*}
        rel=${rel#*/}
        if [ -L "$cur" ] || { [ -e "$cur" ] && [ ! -d "$cur" ]; }; then rm -f -- "$cur"; fi
    done
    rm -rf -- "$1"
    tar -xpf "$base/ws.tar" -C / --no-recursion --no-unquote "${1#/}"
}

if [ "$has_ws" = 1 ] && [ "$gnu" = 1 ] && { has r || has i || has c; }; then
    if [ -L "$ws" ] || [ ! -d "$ws" ]; then
        add tampered "the workspace $ws was replaced"
    else
        ws_scan > "$out/ws.now"
        : > "$out/ws.diff"
        # awk only when the lists differ (the same walk of an unchanged tree lists the same
        # lines in the same order; the tracked files are few: builtins compare them)
        if ! same_lines "$base/ws.sig" "$out/ws.now"; then awk -F "$tab" -v out="$tab" '
            FILENAME == ARGV[1] { base[$1] = $2; next }
            { seen[$1] = 1
              if (!($1 in base)) print "N" out $1
              else if (base[$1] != $2) print "R" out $1 }
            END { for (p in base) if (!(p in seen)) print "R" out p }
        ' "$base/ws.sig" "$out/ws.now" > "$out/ws.diff"; fi
        sort_u "$out/ws.diff"
        while IFS="$tab" read -r kind path; do
            if [ "$kind" = R ]; then
                if has r; then
                    restore_ws "$path"
                    add restored "$path"
                else
                    note "changed, kept (restore_build_config is off): $path"
                fi
                continue
            fi
            case ${path##*/} in
                conftest.py)
                    if has c; then rm -rf -- "$path"; add removed "$path"; fi ;;
                pytest.ini | .pytest.ini | sitecustomize.py | usercustomize.py | *.pth)
                    if has i; then rm -rf -- "$path"; add removed "$path"; fi ;;
                *) note "new file kept (pytest ignores it under -c /dev/null): $path" ;;
            esac
        done < "$out/ws.diff"
    fi
fi

if [ "$has_ws" = 1 ] && [ "$gnu" = 1 ] && has i && [ -d "$ws" ] && [ ! -L "$ws" ]; then
    # One walk: names with control characters made during the run (never legitimate,
    # never parsed: one x printed per entry, counted only when there is one), bytecode
    # written during the run (a poisoned __pycache__ or a sourceless module; not in .git),
    # and symlinks (not in .git or node_modules), checked below.
    # (Below an older such name, only new ones count: it is walked, never listed.)
    find "$ws" -xdev -mindepth 1 \
        \( -name "$cntrl" -cnewer "$base/stamp" -prune -printf x -exec rm -rf -- {} + \) -o \
        -path "$cntrl" -o -name .git -o -path '*/.git/*' -o \
        \( -name '*.pyc' -o -name '*.pyo' \) -cnewer "$base/stamp" -fprint "$out/pyc" -o \
        -type l ! -name node_modules ! -path '*/node_modules/*' -fprint "$out/links" \
        2>/dev/null > "$out/cntrl" || :
    if [ -s "$out/cntrl" ]; then
        add removed "$(wc -c < "$out/cntrl") entries with control characters in their names"
    fi
    while IFS= read -r f; do rm -f -- "$f"; add removed "$f"; done < "$out/pyc"
    # New top-level modules that shadow the standard library or the test runner (awk only
    # when a name is new).
    old_top=$nl
    while IFS= read -r name; do old_top="$old_top$name$nl"; done < "$base/ws.top"
    top_names "$ws" > "$out/ws.top.now"
    : > "$out/ws.top.new"
    while IFS= read -r name; do
        case $old_top in *"$nl$name$nl"*) continue ;; esac
        case $name in  # a name the awk below skips (a dot, no module suffix): no awk for it
            *.py | *.pyc | *.pyw | *.so | *.pyd) ;;
            *.*) continue ;;
        esac
        printf '%s\n' "$name" >> "$out/ws.top.new"
    done < "$out/ws.top.now"
    : > "$out/shadow"
    if [ -s "$out/ws.top.new" ]; then
        awk '
            FILENAME == ARGV[1] { mods[$0] = 1; next }
            {
                m = $0
                if (m ~ /\.(py|pyc|pyw)$/) sub(/\.[^.]*$/, "", m)
                else if (m ~ /\.(so|pyd)$/) sub(/\..*$/, "", m)
                else if (m ~ /\./) next
                if (m in mods) print $0
            }
        ' "$base/modules" "$out/ws.top.new" > "$out/shadow"
    fi
    while IFS= read -r name; do
        case $name in
            *.*) rm -rf -- "${ws:?}/$name"; add removed "$ws/$name" ;;
            *) if [ -d "$ws/$name" ]; then rm -rf -- "${ws:?}/$name"; add removed "$ws/$name"; fi ;;
        esac
    done < "$out/shadow"
    # Symlinks that lead into the verifier's, the solution's or benchflow's folders.
    while IFS= read -r link; do
        target=$(readlink -m -- "$link" 2>/dev/null || readlink -f -- "$link" 2>/dev/null || :)
        for prot in "$base" "$mount" "$@"; do
            case $target in
                "$prot" | "$prot"/*) rm -f -- "$link"; add removed "$link -> $target"; break ;;
            esac
        done
    done < "$out/links"
fi

if [ "$gnu" = 1 ] && has i; then
    find /tmp -xdev \( -path /tmp/.benchflow -o -name "$cntrl" \) -prune -o \
        \( -name '*.py' -o -name '*.pyc' -o -name '*.pth' \) -cnewer "$base/stamp" -print \
        2>/dev/null > "$out/tmp" || :
    while IFS= read -r f; do rm -rf -- "$f"; add removed "$f"; done < "$out/tmp"
fi

# check_plugins [SYS_CHECK]: sha256sum -c of the image's pytest plugins' files
# (plugins.sums), and of sys.now against SYS_CHECK's line; the failures in
# $out/plugins.check. sys_same=1 only when every line was read and matched (--strict).
plugins_checked=0
sys_same=0
check_plugins() {
    plugins_checked=1
    set -- "$base/plugins.sums" "$@"
    if [ ! -s "$1" ]; then shift; fi
    : > "$out/plugins.check"
    if [ $# -eq 0 ]; then return 0; fi
    if [ "${2:-}" = "$out/sys.check" ]; then
        if sha256sum --quiet --strict -c -- "$@" > "$out/plugins.check" 2>/dev/null; then
            sys_same=1
        fi
    else
        sha256sum --quiet -c -- "$@" > "$out/plugins.check" 2>/dev/null || :
    fi
}

# ---- s: system integrity --------------------------------------------------------------
if [ "$gnu" = 1 ] && has s; then
    sys_scan "$out/cntrl.sys" > "$out/sys.now"
    # The same lines as sys.sig (its sha256 is in the digest, checked above) need no awk:
    # told by the sha256sum of the plugins' files, which checks this list too (one program).
    sig_sum=${want_digest%% sys.sig *}
    sig_sum=${sig_sum##* }
    case $sig_sum in
        *[!0-9a-f]*) ;;
        *) if [ ${#sig_sum} -eq 64 ] && [ -s "$base/plugins.sums" ]; then
               printf '%s  %s\n' "$sig_sum" "$out/sys.now" > "$out/sys.check"
               check_plugins "$out/sys.check"
           fi ;;
    esac
    : > "$out/sys.diff"
    if [ "$sys_same" != 1 ]; then awk -F "$tab" -v out="$tab" '
        function dirname(p) { sub(/\/[^\/]*$/, "", p); return p == "" ? "/" : p }
        function basename(p) { sub(/^.*\//, "", p); return p }
        function modname(n) {
            if (n ~ /\.(py|pyc|pyw)$/) { sub(/\.[^.]*$/, "", n); return n }
            if (n ~ /\.(so|pyd)$/) { sub(/\..*$/, "", n); return n }
            return n ~ /\./ ? "" : n
        }
        function classify(p,    d, n, r) {
            d = dirname(p); n = basename(p)
            if (d in flat)
                return (n in bins || (n in tools && d !~ /^\/(usr\/)?s?bin$/)) ? "rm" : "keep"
            for (r in tree) {
                if (index(p, r "/") != 1) continue
                if (r ~ /^\/etc\//) return "rm"
                if (n ~ /\.(pth|pyc|pyo)$/ || n == "sitecustomize.py" || n == "usercustomize.py")
                    return "rm"
                if (d == r && modname(n) != "" && (modname(n) in mods || modname(n) in sysmods))
                    return "rm"
            }
            return "keep"
        }
        BEGIN {
            split("python python3 pytest py.test pytest-3 pip pip3 uv uvx curl wget bash sh " \
                  "dash env timeout git node npm npx make", t, " ")
            for (i in t) tools[t[i]] = 1
        }
        FILENAME == ARGV[1] { tree[$0] = 1; next }
        FILENAME == ARGV[2] { flat[$0] = 1; next }
        FILENAME == ARGV[3] { mods[$0] = 1; next }
        FILENAME == ARGV[4] {
            base[$1] = $2
            if (dirname($1) in flat) bins[basename($1)] = 1
            if (dirname($1) in tree && modname(basename($1)) != "") sysmods[modname(basename($1))] = 1
            next
        }
        { now[$1] = 1
          if (!($1 in base)) print "N" out $1 out classify($1)
          else if (base[$1] != $2) print "C" out $1 }
        END { for (p in base) if (!(p in now)) print "D" out p }
    ' "$base/sys.tree" "$base/sys.flat" "$base/modules" "$base/sys.sig" "$out/sys.now" \
        > "$out/sys.diff"; fi
    sort_u "$out/sys.diff"
    kept=0
    while IFS="$tab" read -r kind path action; do
        if [ "$path" = /etc/ld.so.preload ]; then
            rm -f -- /etc/ld.so.preload
            if [ -e "$base/ld.so.preload" ] || [ -L "$base/ld.so.preload" ]; then
                cp -P -p -- "$base/ld.so.preload" /etc/ld.so.preload
                add restored /etc/ld.so.preload
            else
                add removed /etc/ld.so.preload
            fi
            continue
        fi
        case $kind in
            C) add tampered "changed: $path" ;;
            D) add tampered "deleted: $path" ;;
            N)
                if [ "$action" = rm ]; then
                    rm -rf -- "$path"
                    add removed "$path"
                else
                    kept=$((kept + 1))
                fi ;;
        esac
    done < "$out/sys.diff"
    if [ "$kept" -gt 0 ]; then
        note "$kept new files kept in system folders (new packages; nothing they shadow)"
    fi
    if [ -s "$out/cntrl.sys" ]; then
        add tampered "$(wc -c < "$out/cntrl.sys") new entries with control characters in their names"
    fi
    plugin_dists "$out/plugins"
    if [ -s "$out/plugins" ]; then
        comm -13 "$base/plugins" "$out/plugins" | while IFS= read -r dist; do
            note "new pytest plugin (not loaded: not in the baseline): $dist"
        done
    fi
fi

# ---- the image's pytest plugins: the verifier loads them, so they must be unchanged ----
if [ "$plugins_checked" != 1 ]; then check_plugins; fi
if [ -s "$out/plugins.check" ]; then
    sed -n 's/: FAILED.*$//p' "$out/plugins.check" > "$out/plugins.changed"
    while IFS= read -r f; do
        if [ "$f" != "$out/sys.now" ]; then add tampered "pytest plugin file changed: $f"; fi
    done < "$out/plugins.changed"
fi

# ---- the verifier folder, emptied for a fresh upload ---------------------------------
if [ "$mount" != / ] && { [ -e "$mount" ] || [ -L "$mount" ]; }; then rm -rf -- "$mount"; fi

printf '{"killed":%s,"survivors":%s,"restored":' "$killed" "$survivors"
json_list "$out/restored"
printf ',"removed":'
json_list "$out/removed"
printf ',"tampered":'
json_list "$out/tampered"
printf ',"notes":'
json_list "$out/notes"
printf '}\n'
