#!/bin/sh
# Fold benchflow's extra CA certificates into the system trust store. POSIX sh: runs in
# images without bash. Idempotent. Works whether or not the ca-certificates package exists.
set -eu
dir=/usr/local/share/ca-certificates/benchflow
bundle=/etc/ssl/certs/ca-certificates.crt
if command -v update-ca-certificates >/dev/null 2>&1; then
    update-ca-certificates >/dev/null 2>&1 || true
fi
mkdir -p /etc/ssl/certs
touch "$bundle"
# update-ca-certificates may be absent or may have skipped our folder: append what is missing.
for pem in "$dir"/benchflow-*.crt; do
    [ -f "$pem" ] || continue
    if ! grep -qF "$(sed -n 2p "$pem")" "$bundle"; then
        cat "$pem" >> "$bundle"
    fi
done
