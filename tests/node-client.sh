#!/bin/sh
# The Node client (clients/node) against real redis-servers: node's own
# test runner (node:test) runs tests/node/*.test.js, each of which starts
# its private redis-server on a unix socket in a temporary directory and
# stops it by pid.  The package under test is the build tree's copy
# (clients/node, made by "make node-stage" with this build's scripts);
# ioredis is installed into it from the npm registry, or npm's cache, on
# first use (npm install --no-save --no-package-lock: no lock file, nothing
# in the source tree).  The type check installs typescript and @types/node
# the same way into tests/node-dev.
#
# Skipped (77, one line) without node 18+, npm, redis-server, or when the
# modules cannot be installed (no registry and no cache).  With --install,
# only installs them (make check does, before the tests start; a failed
# install is tried again here).
set -u
srcdir=${srcdir:-.}
top=${TOP_BUILDDIR:-.}
server=${REDIS_SERVER:-$(command -v redis-server 2>/dev/null)}
pkg=$top/clients/node
dev=$top/tests/node-dev

skip() { echo "node client tests skipped: $*"; exit 77; }
command -v node >/dev/null 2>&1 || skip "no node (apt-get install nodejs)"
command -v npm >/dev/null 2>&1 || skip "no npm (apt-get install npm)"
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
[ "${major:-0}" -ge 18 ] 2>/dev/null || skip "node $(node --version) is older than 18"
[ -f "$pkg/scripts/enqueue.lua" ] || skip "the package is not staged ($pkg; make node-stage)"

# npm prints its notices on stderr; keep them for a failure only.
npm_log=$top/tests/node-npm.log
# node_modules/.delayq-ready says the install was whole: the tests that
# use the package (tests/conformance/node.sh, the Python daemon test) look
# for it, never for a directory a running npm may have half written.
ready=$pkg/node_modules/.delayq-ready
if [ ! -f "$ready" ]; then
    (cd "$pkg" && npm install --no-save --no-package-lock --no-audit --no-fund \
        --prefer-offline >"$npm_log" 2>&1 && touch node_modules/.delayq-ready) ||
        skip "cannot install ioredis into $pkg (no npm registry or cache; see $npm_log)"
fi
if [ ! -d "$dev/node_modules/typescript" ] || [ ! -d "$dev/node_modules/@types/node" ]; then
    mkdir -p "$dev" && printf '{ "private": true }\n' > "$dev/package.json"
    (cd "$dev" && npm install --no-save --no-package-lock --no-audit --no-fund \
        --prefer-offline typescript @types/node >>"$npm_log" 2>&1) ||
        echo "node-client: typescript could not be installed: the type check will skip"
fi
[ "${1:-}" = --install ] && exit 0
{ [ -n "$server" ] && [ -x "$server" ]; } || skip "no redis-server (apt-get install redis-server)"

DELAYQ_NODE_PKG=$(cd "$pkg" && pwd) \
DELAYQ_TOP_BUILDDIR=$(cd "$top" && pwd) \
DELAYQ_NODE_DEV=$(cd "$dev" 2>/dev/null && pwd) \
DELAYQ_SCRIPTS_DIR=$(cd "$top/scripts" && pwd) \
DELAYQ_SRCDIR=$(cd "$srcdir" && pwd) \
REDIS_SERVER=$server \
    exec timeout 900 node --test "$srcdir"/tests/node/*.test.js
