#!/bin/sh
# build-aux/embed-scripts.sh makes the enum and the table from one list:
# the enum follows the list's order, each table entry sits at its own enum
# constant, and a list it cannot make both from (a name that is no C
# identifier, a name twice, a name without its file) is refused with the
# name, before anything is written.
set -u
srcdir=${srcdir:-.}
gen="$srcdir/build-aux/embed-scripts.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "$*"; exit 1; }

mkdir "$tmp/src"
printf 'local function one() return 1 end\n' >"$tmp/src/lib.lua"
printf 'return one()\n' >"$tmp/src/b_two.lua"
printf '#!lua flags=no-writes\nreturn 2\n' >"$tmp/src/a1.lua"

sh "$gen" enum "$tmp/gen.h" b_two a1 || fail "enum: refused a good list"
got=$(grep 'DQ_SCRIPT_' "$tmp/gen.h" | tr -d ' ,' | tr '\n' ' ')
[ "$got" = "DQ_SCRIPT_B_TWO DQ_SCRIPT_A1 DQ_SCRIPT_COUNT " ] || fail "enum: got '$got'"

sh "$gen" table "$tmp/gen.c" "$tmp/out" "$tmp/src" b_two a1 || fail "table: refused a good list"
grep -q '^  \[DQ_SCRIPT_B_TWO\] = { "b_two", ' "$tmp/gen.c" || fail "table: no entry at DQ_SCRIPT_B_TWO"
grep -q '^  \[DQ_SCRIPT_A1\] = { "a1", ' "$tmp/gen.c" || fail "table: no entry at DQ_SCRIPT_A1"
# The full script: shebang first, then the prelude part it uses, the body.
[ "$(head -n 1 "$tmp/out/a1.lua")" = '#!lua flags=no-writes' ] || fail "a1.lua: shebang not first"
grep -q 'local function one' "$tmp/out/b_two.lua" || fail "b_two.lua: prelude missing"

# An unchanged header is left alone (nothing that includes it rebuilds).
touch -d '2000-01-01' "$tmp/gen.h"
sh "$gen" enum "$tmp/gen.h" b_two a1 || fail "enum: second run refused"
[ "$(find "$tmp/gen.h" -newermt '2001-01-01')" = "" ] || fail "enum: unchanged header rewritten"

refused() {     # refused WHAT EXPECTED-TEXT ARGS...
    what=$1 want=$2
    shift 2
    rm -f "$tmp/bad.h" "$tmp/bad.c"
    out=$(sh "$gen" "$@" 2>&1) && fail "$what: accepted"
    case $out in
        *"$want"*) ;;
        *) fail "$what: '$out' does not say '$want'" ;;
    esac
    [ ! -e "$tmp/bad.h" ] || fail "$what: header written anyway"
}
refused "upper case" "script name 'Two'" enum "$tmp/bad.h" a1 Two
refused "dash" "script name 'b-two'" enum "$tmp/bad.h" a1 b-two
refused "twice" "script 'a1' is listed twice" enum "$tmp/bad.h" a1 b_two a1
refused "no file" "nosuch.lua: no such script" table "$tmp/bad.c" "$tmp/out" "$tmp/src" a1 nosuch
refused "empty list" "no script names" enum "$tmp/bad.h"
echo "embed-scripts.sh: enum, table and refusals as documented"
