# prelude.awk: the part of the shared prelude (lib.lua) that one script
# needs.  Redis runs a script's whole text on every call, and each
# "local function" of the prelude makes a closure each time: a prelude
# of 35 functions cost every call 3.5 us where "return 1" costs 1.  So each
# script gets only the prelude's definitions it uses, directly or through
# another, in the prelude's order.
#
# A script whose text has the line "-- prelude: on demand" pays for none
# of it until it asks: its functions are declared (nil) and made by a
# call of prelude(), which the script makes only on its rarer paths (a
# refused argument, a priority, a replacement); its other definitions
# (constants, the string functions' short names, per-call state) cost
# next to nothing and are made as usual.  So a producer's common call
# runs its own few lines and no closure of the prelude.  "-- prelude: on
# demand except NAME ..." makes the NAMEd functions, and those they use,
# as usual: what the common call needs (show's read_record).
#
# Usage: awk -f prelude.awk lib.lua SCRIPT.lua
# A definition is a top-level "local function NAME" or "local NAME[, ...] ="
# with the comment lines right above it, up to the next definition.  A
# name counts as used wherever it appears as a word outside whole-line
# comments (a mention in a string or a trailing comment only keeps a
# definition that need not be kept).
function words(text, out,    lines, nl, t, n, i, j) {
    nl = split(text, lines, "\n")
    for (j = 1; j <= nl; j++) {
        if (lines[j] ~ /^[ \t]*--/) continue
        n = split(lines[j], t, /[^A-Za-z0-9_]+/)
        for (i = 1; i <= n; i++) if (t[i] != "") out[t[i]] = 1
    }
}
FNR == NR {
    if (match($0, /^local function /)) isfunc[NR] = 1
    lib[++nlib] = $0
    next
}
{
    body = body "\n" $0
    if ($0 ~ /^-- prelude: on demand( except [A-Za-z_ ]+)?$/) {
        lazy = 1
        if (match($0, / except /)) eager_roots = substr($0, RSTART + 8)
    }
}
END {
    # Find the definitions: their first line, names and text.
    ndef = 0
    for (i = 1; i <= nlib; i++) {
        line = lib[i]
        names = ""
        if (match(line, /^local function [A-Za-z_][A-Za-z0-9_]*/))
            names = substr(line, 16, RLENGTH - 15)
        else if (match(line, /^local [A-Za-z_][A-Za-z0-9_, ]*=/))
            names = substr(line, 7, RLENGTH - 7)
        if (names == "") continue
        first = i
        while (first > 1 && lib[first - 1] ~ /^--/) first--
        if (ndef > 0 && first <= start[ndef]) first = start[ndef] + 1
        ndef++
        start[ndef] = first
        defline[ndef] = i
        gsub(/ /, "", names)
        defnames[ndef] = names
        k = split(names, nm, ",")
        for (j = 1; j <= k; j++) owner[nm[j]] = ndef
    }
    for (d = 1; d <= ndef; d++) {
        stop = d < ndef ? start[d + 1] - 1 : nlib
        text[d] = ""
        for (i = start[d]; i <= stop; i++) text[d] = text[d] lib[i] "\n"
    }
    # What the script uses, then what those use, until nothing is added.
    words(body, used)
    do {
        added = 0
        for (w in used)
            if ((w in owner) && !(owner[w] in keep)) {
                keep[owner[w]] = 1
                delete more
                words(text[owner[w]], more)
                for (m in more) if (!(m in used)) { used[m] = 1; added = 1 }
                added = 1
            }
    } while (added)
    if (!lazy) {
        for (d = 1; d <= ndef; d++) if (d in keep) printf "%s", text[d]
        exit
    }
    # On demand: the definitions that are not functions as usual, then the
    # functions' names, then prelude() that makes them.
    # The functions made as usual: the roots and what they use.
    n = split(eager_roots, roots, " ")
    for (i = 1; i <= n; i++) if (roots[i] in owner) now_made[owner[roots[i]]] = 1
    do {
        added = 0
        for (d in now_made) {
            delete more
            words(text[d], more)
            for (m in more)
                if ((m in owner) && !(owner[m] in now_made)) { now_made[owner[m]] = 1; added = 1 }
        }
    } while (added)
    nf = 0
    for (d = 1; d <= ndef; d++) {
        if (!(d in keep)) continue
        if ((defline[d] in isfunc) && !(d in now_made)) fn[++nf] = d
        else printf "%s", text[d]
    }
    if (nf == 0) {
        print "local function prelude() end"
        exit
    }
    printf "local %s", defnames[fn[1]]
    for (i = 2; i <= nf; i++) printf ",%s%s", (i % 6 == 1 ? "\n  " : " "), defnames[fn[i]]
    printf "\n-- The prelude's functions above, made on demand (build-aux/prelude.awk).\n"
    print "local function prelude()"
    for (i = 1; i <= nf; i++) {
        t = text[fn[i]]
        sub(/\nlocal function /, "\nfunction ", t)
        if (substr(t, 1, 15) == "local function ") t = substr(t, 7)
        printf "%s", t
    }
    print "end"
}
