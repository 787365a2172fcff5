#!/bin/sh
# role_access.sh WORKDIR GROUP SCRATCH_ROOT [--role USER MODE NAME [--out PATH]...]...
# Give each role's Unix user the workspace access its role declares (run as root, before
# any agent runs). MODE rw: USER joins GROUP, which owns the workspace with group write
# (directories setgid, so new files keep the group); MODE ro: no write anywhere in the
# workspace but the PATHs given with --out (workspace-relative; a PATH ending in / is a
# folder the role owns, else a file it owns, created empty if missing). Every role gets
# SCRATCH_ROOT/NAME (mode 700). Everyone may read the workspace; nobody else may write it.
# Values arrive as arguments only. Exit codes: 0 ok, 2 bad arguments, 3 no way to make
# the group.
set -eu
[ $# -ge 3 ] || { echo "role_access.sh: WORKDIR GROUP SCRATCH_ROOT expected" >&2; exit 2; }
workdir=$1 group=$2 scratch=$3
shift 3
case $group in ''|-*|*[!A-Za-z0-9._-]*) echo "role_access.sh: bad group" >&2; exit 2 ;; esac
case $workdir in /*) ;; *) echo "role_access.sh: WORKDIR must be absolute" >&2; exit 2 ;; esac

if ! grep -q "^$group:" /etc/group; then
    if command -v groupadd >/dev/null 2>&1; then
        groupadd "$group"
    elif command -v addgroup >/dev/null 2>&1; then
        addgroup -S "$group"
    elif [ -w /etc/group ]; then
        gid=2000
        while grep -q "^[^:]*:[^:]*:$gid:" /etc/group; do gid=$((gid + 1)); done
        echo "$group:x:$gid:" >> /etc/group
    else
        echo "role_access.sh: cannot create group $group" >&2
        exit 3
    fi
fi

join() {  # join USER: add USER to the group
    if id -nG "$1" | tr ' ' '\n' | grep -qx "$group"; then return 0; fi
    if command -v usermod >/dev/null 2>&1; then
        usermod -a -G "$group" "$1"
    elif command -v addgroup >/dev/null 2>&1 && ! command -v groupadd >/dev/null 2>&1; then
        addgroup "$1" "$group"
    else
        sed -i "s/^\($group:[^:]*:[^:]*:\)\(.*\)$/\1\2,$1/; s/^\($group:[^:]*:[^:]*:\),/\1/" \
            /etc/group
    fi
}

check_args() {  # validate every argument; the read-write users join the group
    while [ $# -gt 0 ]; do
        case $1 in
            --role)
                [ $# -ge 4 ] || { echo "role_access.sh: --role USER MODE NAME" >&2; exit 2; }
                case $4 in
                    ''|-*|*[!A-Za-z0-9._-]*) echo "role_access.sh: bad role" >&2; exit 2 ;;
                esac
                id -u "$2" >/dev/null 2>&1 || { echo "role_access.sh: no user $2" >&2; exit 2; }
                case $3 in
                    rw) join "$2" ;;
                    ro) ;;
                    *) echo "role_access.sh: MODE is rw or ro" >&2; exit 2 ;;
                esac
                shift 4 ;;
            --out)
                [ $# -ge 2 ] || { echo "role_access.sh: --out PATH" >&2; exit 2; }
                case $2 in
                    /*|*..*|'') echo "role_access.sh: bad output $2" >&2; exit 2 ;;
                esac
                shift 2 ;;
            *) echo "role_access.sh: unexpected $1" >&2; exit 2 ;;
        esac
    done
}

give_access() {  # scratch folders and outputs
    user=
    while [ $# -gt 0 ]; do
        case $1 in
            --role)
                user=$2
                mkdir -p "$scratch/$4"
                chown "$user" "$scratch/$4"
                chmod 700 "$scratch/$4"
                shift 4 ;;
            --out)
                path=$workdir/$2
                case $2 in
                    */)
                        mkdir -p "$path"
                        chown -h "$user:$group" "$path"
                        chmod 2775 "$path" ;;
                    *)
                        mkdir -p "$(dirname "$path")"
                        [ -e "$path" ] || [ -L "$path" ] || : > "$path"
                        chown -h "$user:$group" "$path"
                        chmod 664 "$path" ;;
                esac
                shift 2 ;;
        esac
    done
}

check_args "$@"
mkdir -p "$workdir"
chgrp -hR "$group" "$workdir"
chmod -R g+rwX,o+rX,o-w "$workdir"
find "$workdir" -type d -exec chmod g+s {} +
mkdir -p "$scratch"
chmod 755 "$scratch"
give_access "$@"
printf '{"group": "%s", "gid": %s}\n' "$group" "$(grep "^$group:" /etc/group | cut -d: -f3)"
