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
# "-- prelude: here": the prelude's functions are made at that line, its
# other definitions at the top; "except NAME" makes NAME (and what it
# uses) at the top; a function used above the line stops the build.
mkdir "$tmp/here"
cat >"$tmp/here/lib.lua" <<'LUA'
local K = 7
local function two() return 2 end
local function three() return two() + 1 end
local function four() return K - 3 end
LUA
printf 'if ARGV[1] then return K end\n-- prelude: here\nreturn three()\n' >"$tmp/here/late.lua"
printf 'if ARGV[1] then return three() end\n-- prelude: here\nreturn four()\n' >"$tmp/here/early.lua"
printf 'if ARGV[1] then return three() end\n-- prelude: here except three\nreturn four()\n' \
    >"$tmp/here/kept.lua"
sh "$gen" table "$tmp/here.c" "$tmp/here/out" "$tmp/here" late kept \
    || fail "here: refused good scripts"
out=$tmp/here/out/late.lua
line() { grep -n -- "$2" "$1" | head -n 1 | cut -d: -f1; }
[ "$(line "$out" '^local K = 7')" -lt "$(line "$out" '^if ARGV')" ] || fail "late: K not at the top"
[ "$(line "$out" '^-- prelude: here')" -lt "$(line "$out" '^local function two')" ] \
    || fail "late: two() made above the line"
[ "$(line "$out" '^local function three')" -lt "$(line "$out" '^return three')" ] \
    || fail "late: three() made after its use"
grep -q 'function four' "$out" && fail "late: four() made though unused"
out=$tmp/here/out/kept.lua
[ "$(line "$out" '^local function three')" -lt "$(line "$out" '^if ARGV')" ] \
    || fail "kept: three() not at the top"
[ "$(line "$out" '^local function two')" -lt "$(line "$out" '^local function three')" ] \
    || fail "kept: two(), which three() uses, not above it"
[ "$(line "$out" '^-- prelude: here')" -lt "$(line "$out" '^local function four')" ] \
    || fail "kept: four() made above the line"
out=$(sh "$gen" table "$tmp/here.c" "$tmp/here/out" "$tmp/here" early 2>&1) \
    && fail "early: a function used above the line was accepted"
case $out in
    *"three is used above"*) ;;
    *) fail "early: '$out' does not name three" ;;
esac
echo "embed-scripts.sh: enum, table and refusals as documented"
