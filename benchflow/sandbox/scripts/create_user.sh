#!/bin/sh
# create_user.sh USER [WORKDIR]: make sure the sandbox user USER exists with a home it can
# write, and give it WORKDIR (chown -R; never a system folder). Idempotent. Values arrive as
# arguments only. Prints one JSON line: {"user": ..., "uid": ..., "gid": ..., "home": ...}.
# Exit codes: 0 ok, 2 invalid user name, 3 no way to create the user.
set -eu
user=${1:-}
workdir=${2:-}
case $user in
    ''|-*|*[!A-Za-z0-9._-]*) echo "create_user.sh: invalid user name" >&2; exit 2 ;;
esac

if ! id -u "$user" >/dev/null 2>&1; then
    if command -v useradd >/dev/null 2>&1; then
        useradd --create-home --home-dir "/home/$user" --shell /bin/sh --user-group "$user"
    elif command -v adduser >/dev/null 2>&1; then
        adduser -D -h "/home/$user" -s /bin/sh "$user"
    elif [ -w /etc/passwd ]; then
        uid=1000
        while grep -q "^[^:]*:[^:]*:$uid:" /etc/passwd; do
            uid=$((uid + 1))
        done
        echo "$user:x:$uid:$uid::/home/$user:/bin/sh" >> /etc/passwd
        echo "$user:x:$uid:" >> /etc/group
    else
        echo "create_user.sh: cannot create user (no useradd/adduser, /etc/passwd read-only)" >&2
        exit 3
    fi
fi

uid=$(id -u "$user")
gid=$(id -g "$user")
home=
while IFS=: read -r name _ _ _ _ dir _; do
    if [ "$name" = "$user" ]; then home=$dir; fi
done < /etc/passwd
case $home in
    ''|/|/nonexistent|/dev/null|*[\"\\]*) home=/home/$user ;;
esac
if [ "$uid" != 0 ]; then
    mkdir -p "$home"
    if [ "$(stat -c %u "$home")" != "$uid" ]; then
        case $home in
            /home/*) chown "$uid:$gid" "$home" ;;
            *) home=/home/$user; mkdir -p "$home"; chown "$uid:$gid" "$home" ;;
        esac
    fi
    if [ -n "$workdir" ]; then
        case $workdir in
            /|/bin|/bin/*|/boot|/boot/*|/dev|/dev/*|/etc|/etc/*|/lib|/lib/*|/lib64|/lib64/*|\
            /proc|/proc/*|/root|/sbin|/sbin/*|/sys|/sys/*|/usr|/usr/*|/var|/tmp|/opt)
                echo "create_user.sh: not giving system folder $workdir to $user" >&2 ;;
            *)
                mkdir -p "$workdir"
                chown -R "$uid:$gid" "$workdir" ;;
        esac
    fi
fi
printf '{"user": "%s", "uid": %s, "gid": %s, "home": "%s"}\n' "$user" "$uid" "$gid" "$home"
