/*
 * The Lua scripts that make every state change of a job, embedded at build
 * time: build-aux/embed-scripts.sh generates scripts_gen.h (the enum) and
 * scripts_gen.c (the table) from the list SCRIPT_NAMES in Makefile.am and
 * the files in src/scripts/, prepending the shared prelude lib.lua.
 */
#ifndef DQ_SCRIPTS_H
#define DQ_SCRIPTS_H

/* enum dq_script_id: DQ_SCRIPT_<NAME> for each name of SCRIPT_NAMES in
 * Makefile.am, in that order, then DQ_SCRIPT_COUNT.  Generated from that one
 * list, as dq_scripts is, so adding a script is adding its name there. */
#include "scripts_gen.h"

struct dq_script {
    const char *name;   /* file name without .lua */
    const char *sha1;   /* hex digest of text, as EVALSHA wants it */
    const char *text;   /* the full script, prelude included */
};

extern const struct dq_script dq_scripts[DQ_SCRIPT_COUNT];

#endif
