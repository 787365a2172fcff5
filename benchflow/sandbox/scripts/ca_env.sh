#!/bin/sh
# ca_env.sh BUNDLE SYSTEM_BUNDLE DIR: decide the CA variables of every exec, after
# install_ca.sh ran. Prints VAR=VALUE for each variable benchflow must set; prints nothing
# for one the image already sets right. A variable only ever points at a file that exists:
#   the image sets it to an existing file of its own: keep that file's certificates and add
#     benchflow's, in DIR/VAR.pem (a working value is never overridden)
#   otherwise: benchflow's file (BUNDLE for NODE_EXTRA_CA_CERTS, SYSTEM_BUNDLE for the
#     rest) when it exists; else the variable is left as the image has it
set -eu
bundle=$1
system=$2
dir=$3
for var in NODE_EXTRA_CA_CERTS SSL_CERT_FILE REQUESTS_CA_BUNDLE PIP_CERT; do
    cur=$(printenv "$var" || :)
    ours=$system
    if [ "$var" = NODE_EXTRA_CA_CERTS ]; then ours=$bundle; fi
    if [ -n "$cur" ] && [ "$cur" != "$ours" ] && [ -f "$cur" ] && [ -r "$cur" ]; then
        cat "$cur" "$bundle" > "$dir/$var.pem"
        chmod 644 "$dir/$var.pem"
        printf '%s=%s\n' "$var" "$dir/$var.pem"
    elif [ -f "$ours" ] && [ "$cur" != "$ours" ]; then
        printf '%s=%s\n' "$var" "$ours"
    fi
done
