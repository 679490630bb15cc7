#!/bin/sh
# The conformance cases (tests/conformance/cases.json) through the Node
# client: run-node.js starts its own private redis-servers (unix sockets in
# a temporary directory, stopped by pid).  It uses the build's package
# (clients/node) with the ioredis that make check installed there before
# the tests (tests/node-modules.stamp, by tests/node-client.sh --install).
#
# Skipped (77, one line) without cases.json, node 18+, redis-server, or
# the package's modules.
set -u
srcdir=${srcdir:-.}
top=${TOP_BUILDDIR:-.}
server=${REDIS_SERVER:-$(command -v redis-server 2>/dev/null)}
cases=$srcdir/tests/conformance/cases.json
pkg=$top/clients/node

skip() { echo "node conformance skipped: $*"; exit 77; }
[ -f "$cases" ] || skip "no $cases"
command -v node >/dev/null 2>&1 || skip "no node (apt-get install nodejs)"
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)
[ "${major:-0}" -ge 18 ] 2>/dev/null || skip "node $(node --version) is older than 18"
{ [ -n "$server" ] && [ -x "$server" ]; } || skip "no redis-server (apt-get install redis-server)"
[ -f "$pkg/node_modules/.delayq-ready" ] ||
    skip "ioredis is not installed in $pkg (tests/node-client.sh --install installs it)"

exec timeout 600 node "$srcdir/tests/conformance/run-node.js" --cases "$cases" \
    --package "$(cd "$pkg" && pwd)" --redis-server "$server" -v
