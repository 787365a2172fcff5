#!/bin/sh
# probe_platform.sh [PYTHONPATH_DIR]: what a sandbox offers for agent runtimes, one key=value
# a line: arch, libc (glibc|musl|unknown), libc_version, python (major.minor), node (major,
# only when npm is there too), wheels (yes when PYTHONPATH_DIR holds an uploaded wheel set).
# Never fails.
set -u
echo "arch=$(uname -m 2>/dev/null || echo unknown)"
if glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null); then
    echo "libc=glibc"
    echo "libc_version=${glibc#glibc }"
elif ls /lib/ld-musl-* >/dev/null 2>&1; then
    echo "libc=musl"
else
    echo "libc=unknown"
fi
if command -v python3 >/dev/null 2>&1; then
    echo "python=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)"
fi
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    echo "node=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)"
fi
if [ -n "${1:-}" ] && [ -f "$1/.complete" ]; then
    echo "wheels=yes"
fi
exit 0
