#!/bin/sh
# No two modules of src/ depend on each other, directly or round a loop:
# a module (src/DIR/NAME.c) depends on another when its object uses a
# symbol the other defines.  Read off the built objects with nm, so that a
# call through a forward declaration counts as much as an #include; tsort
# names any loop.  Then the #include edges between the modules' headers
# (read from the sources), so that no loop hides behind headers alone.
set -u
command -v nm >/dev/null 2>&1 || { echo "nm is not installed: skipping" >&2; exit 77; }
objs=$(find src -name '*.o' ! -name 'tests_*' 2>/dev/null)
# One module may be split into files of one room that share a private
# header: DIR/NAME.c and DIR/NAME_PART.c beside DIR/NAME_int.h are the
# module DIR/NAME (its parts call each other, as worker_run.c and
# worker_report.c do).
srcdir=${srcdir:-$(dirname "$0")/..}
[ -n "$objs" ] || { echo "no objects under src/: build first" >&2; exit 99; }
# "MODULE KIND SYMBOL" for every defined (T/D/B/R) and undefined (U) symbol;
# MODULE is the object's directory (without .libs) and source name. One nm
# and one awk for every object (a process per object made this test take
# 20-50 s of a parallel make check).
ints=$(cd "$srcdir" && find src -name '*_int.h' | sed 's/_int\.h$//' | tr '\n' ' ')
# shellcheck disable=SC2086
table=$(nm -A $objs 2>/dev/null | awk -v ints="$ints" '
    BEGIN { n = split(ints, a, " "); for (i = 1; i <= n; i++) shared[a[i]] = 1 }
    # The module of an object: its path without .libs, the target prefix
    # and .o; NAME_PART is NAME when NAME_int.h is beside it.
    function module(o,   m, base) {
        if (o in mods) return mods[o]
        m = o
        sub(/\/\.libs\//, "/", m); sub(/\/[a-z_]+_la-/, "/", m)
        sub(/\/delayqd?-/, "/", m); sub(/\.o$/, "", m)
        base = m; sub(/_[^_\/]*$/, "", base)
        if (base != m && (base in shared)) m = base
        return mods[o] = m
    }
    NF == 3 && $2 ~ /^[TDBR]$/ { f = $1; sub(/:.*/, "", f); print module(f), "D", $3 }
    NF == 3 && $2 == "U" { f = $1; sub(/:.*/, "", f); print module(f), "U", $3 }' | sort -u)
pairs=$(printf '%s\n' "$table" | awk '
    $2 == "D" { def[$3] = $1; next }
    { use[NR] = $1 " " $3 }
    END { for (i in use) { split(use[i], u, " ");
              if ((u[2] in def) && def[u[2]] != u[1]) print u[1], def[u[2]] } }' | sort -u)
npairs=$(printf '%s\n' "$pairs" | grep -c .)
[ "$npairs" -gt 0 ] || { echo "nm read no module's symbols from the objects under src/" >&2; exit 99; }
if ! out=$(printf '%s\n' "$pairs" | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
    echo "modules depend on each other in a loop:"
    echo "$out"
    exit 1
fi

# The same for #include: a module (src/DIR/NAME.c with src/DIR/NAME.h)
# includes another when either of its files includes the other's header.
# A child's header that includes its parent's, while the parent includes
# the child's, is such a loop even when no symbol crosses it.
src=${srcdir:-.}/src
[ -d "$src" ] || { echo "no sources at $src" >&2; exit 99; }
ipairs=$(cd "$src" && find . -name '*.[ch]' | sed 's|^\./||' | sort | while read -r f; do
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
    while read -r inc; do
        [ -f "$inc" ] || continue
        from=${f%.*}
        to=${inc%.*}
        [ "$from" = "$to" ] || echo "$from $to"
    done
done | sort -u)
nipairs=$(printf '%s\n' "$ipairs" | grep -c .)
if ! out=$(printf '%s\n' "$ipairs" | tsort 2>&1 >/dev/null) || [ -n "$out" ]; then
    echo "modules include each other in a loop (headers of src/):"
    echo "$out"
    exit 1
fi
echo "module dependencies: $npairs, no loop; #include edges: $nipairs, no loop"
