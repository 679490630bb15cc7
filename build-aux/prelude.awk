# prelude.awk: the part of the shared prelude (lib.lua) that one script
# needs.  Redis runs a script's whole text on every call, and each
# "local function" of the prelude makes a closure each time: a prelude
# of 35 functions cost every call 3.5 us where "return 1" costs 1.  So each
# script gets only the prelude's definitions it uses, directly or through
# another, in the prelude's order.
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
    lib[++nlib] = $0
    next
}
{ body = body "\n" $0 }
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
    for (d = 1; d <= ndef; d++) if (d in keep) printf "%s", text[d]
}
