#!/bin/sh
# The man pages render without warnings: mandoc's linter, else groff -ww.
set -u
srcdir=${srcdir:-.}
pages="$srcdir/man/delayq.1 $srcdir/man/delayqd.8 $srcdir/man/delayqd.conf.5 $srcdir/man/delayq-handler.3"
if command -v mandoc >/dev/null 2>&1; then
    out=$(mandoc -T lint -W warning $pages 2>&1)
elif command -v groff >/dev/null 2>&1; then
    out=$(for p in $pages; do groff -ww -man -z "$p" 2>&1; done)
else
    echo "neither mandoc nor groff is installed: skipping" >&2
    exit 77
fi
if [ -n "$out" ]; then
    echo "$out"
    exit 1
fi
echo "man pages: lint clean"
