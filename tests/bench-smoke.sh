#!/bin/sh
# Smoke run of delayq-bench: every run at a tiny size (--quick), to show
# that the benchmark still works; the figures are not checked.  Skipped
# (77) when there is no redis-server.
top=${TOP_BUILDDIR:-.}
server=${REDIS_SERVER:-$(command -v redis-server 2>/dev/null)}
if [ -z "$server" ] || [ ! -x "$server" ]; then
    echo "redis-server not found: skipping (apt-get install redis-server)"
    exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-smoke.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
REDIS_SERVER=$server "$top/delayq-bench" --quick --json "$tmp/out.json" \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
if [ "$rc" -ne 0 ]; then
    echo "delayq-bench --quick exited $rc:"
    cat "$tmp/err"
    exit 1
fi
if ! grep -q '^run  *config  *jobs  *jobs/s' "$tmp/out"; then
    echo "delayq-bench --quick printed no table header"
    exit 1
fi
if ! grep -q '"rows": \[' "$tmp/out.json"; then
    echo "delayq-bench --quick wrote no JSON rows"
    exit 1
fi
exit 0
