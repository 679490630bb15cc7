# prelude.awk: a script as Redis runs it, with the part of the shared
# prelude (lib.lua) that it needs.  Redis runs a script's whole text on
# every call, and each "local function" of the prelude makes a closure
# each time: a prelude of 35 functions cost every call 3.5 us where
# "return 1" costs 1.  So each script gets only the prelude's definitions
# it uses, directly or through another, in the prelude's order, and then
# its own text (without its shebang line, which the caller writes).
#
# A script whose text has the line "-- prelude: here" pays for none of the
# prelude's functions above that line: they are made there, so a call
# that returns before it (a producer's common call) makes none of them.
# The prelude's other definitions (constants, the string functions' short
# names, per-call state) cost little, but not nothing: those the text above
# the line names are made at the top, the others below the line too.  The
# text above the line may use only those; the build stops when it names
# one of the functions made below.  "-- prelude: here except NAME ..."
# makes the NAMEd functions, and those they use, at the top: what the
# common call needs (show's read_record).
#
# Usage: awk -f prelude.awk lib.lua SCRIPT.lua
# A definition is a top-level "local function NAME" or "local NAME[, ...] ="
# with the comment lines right above it, up to the next definition.  A
# name counts as used wherever it appears as a word outside whole-line
# comments (a mention in a string or a trailing comment only keeps a
# definition that need not be kept).
function words(text, out,    lines, nl, t, n, i, j, line) {
    nl = split(text, lines, "\n")
    for (j = 1; j <= nl; j++) {
        if (lines[j] ~ /^[ \t]*--/) continue
        line = lines[j]
        gsub(/string\.[a-z]+/, "", line)   # a library's name, not a short one
        n = split(line, t, /[^A-Za-z0-9_]+/)
        for (i = 1; i <= n; i++) if (t[i] != "") out[t[i]] = 1
    }
}
FNR == NR {
    if (match($0, /^local function /)) isfunc[NR] = 1
    lib[++nlib] = $0
    next
}
{
    if (FNR == 1 && /^#!/) next
    script[++nscript] = $0
    body = body "\n" $0
    if ($0 ~ /^-- prelude: here( except [A-Za-z_ ]+)?$/) {
        if (here) {
            print FILENAME ":" FNR ": a second \"-- prelude: here\"" > "/dev/stderr"
            failed = 1
            exit 1
        }
        here = nscript
        if (match($0, / except /)) eager_roots = substr($0, RSTART + 8)
    }
}
END {
    if (failed) exit 1
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
    if (!here) {
        for (d = 1; d <= ndef; d++) if (d in keep) printf "%s", text[d]
        for (i = 1; i <= nscript; i++) print script[i]
        exit
    }
    # Made at the top: the roots, the definitions that are not functions
    # and that the text above the line names (a constant, a short name),
    # and what any of them uses.  The other definitions that are not
    # functions are made below the line with the functions: each one made
    # costs every call, and a short name costs two table reads.
    above = ""
    for (i = 1; i < here; i++) above = above "\n" script[i]
    words(above, early)
    n = split(eager_roots, roots, " ")
    for (i = 1; i <= n; i++) if (roots[i] in owner) top[owner[roots[i]]] = 1
    for (w in early)
        if ((w in owner) && (owner[w] in keep) && !(defline[owner[w]] in isfunc))
            top[owner[w]] = 1
    do {
        added = 0
        for (d in top) {
            delete more
            words(text[d], more)
            for (m in more)
                if ((m in owner) && !(owner[m] in top)) { top[owner[m]] = 1; added = 1 }
        }
    } while (added)
    # The text above the line may not use what is made below it.
    for (w in early)
        if ((w in owner) && (owner[w] in keep) && !(owner[w] in top)) {
            print FILENAME ": " w " is used above \"-- prelude: here\"," \
                " which makes it" > "/dev/stderr"
            exit 1
        }
    for (d = 1; d <= ndef; d++) if ((d in keep) && (d in top)) printf "%s", text[d]
    for (i = 1; i < here; i++) print script[i]
    print script[here]
    for (d = 1; d <= ndef; d++) if ((d in keep) && !(d in top)) printf "%s", text[d]
    for (i = here + 1; i <= nscript; i++) print script[i]
}
