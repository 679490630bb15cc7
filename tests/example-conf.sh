#!/bin/sh
# The shipped example configuration passes 'delayqd -t' (with the build's
# handlers standing in for the installed ones), and a broken copy of it is
# refused with FILE:LINE and exit 78.
set -u
srcdir=${srcdir:-.}
top=${TOP_BUILDDIR:-.}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
conf=$tmp/delayqd.conf
cp "$srcdir/etc/delayqd.conf" "$conf"
chmod 755 "$top/handlers/.libs"
printf 'handler_dir = "%s";\n' "$(cd "$top/handlers/.libs" && pwd)" >>"$conf"
out=$("$top/delayqd" -t -c "$conf" 2>&1)
rc=$?
if [ $rc -ne 0 ]; then
    echo "example configuration refused (exit $rc): $out"
    exit 1
fi
echo "$out"
# The same file with a typo in a queue setting: refused where the typo is.
sed 's/^    batch = 16;/    bacth = 16;/' "$conf" >"$tmp/typo.conf"
line=$(grep -n 'bacth' "$tmp/typo.conf" | cut -d: -f1)
out=$("$top/delayqd" -t -c "$tmp/typo.conf" 2>&1)
rc=$?
case "$out" in
    *"typo.conf:$line: unknown setting"*) ;;
    *) echo "typo not reported at line $line: $out"; exit 1 ;;
esac
[ $rc -eq 78 ] || { echo "typo: exit $rc, expected 78"; exit 1; }
echo "example configuration: OK; a typo is refused at line $line with exit 78"
