/*
 * The Lua scripts that make every state change of a job, embedded at build
 * time (build-aux/embed-scripts.sh generates scripts_gen.c from
 * the files in src/scripts/, prepending the shared prelude lib.lua).
 */
#ifndef DQ_SCRIPTS_H
#define DQ_SCRIPTS_H

/* Order must match the SCRIPT_NAMES list in Makefile.am. */
enum dq_script_id {
    DQ_SCRIPT_ENQUEUE,
    DQ_SCRIPT_CLAIM,
    DQ_SCRIPT_ACK,
    DQ_SCRIPT_FAIL,
    DQ_SCRIPT_REAP,
    DQ_SCRIPT_CANCEL,
    DQ_SCRIPT_REQUEUE,
    DQ_SCRIPT_PURGE,
    DQ_SCRIPT_STATS,
    DQ_SCRIPT_SHOW,
    DQ_SCRIPT_DEAD_LIST,
    DQ_SCRIPT_RELEASE,
    DQ_SCRIPT_ENQUEUE_MANY,
    DQ_SCRIPT_RENEW,
    DQ_SCRIPT_RECOVER,
    DQ_SCRIPT_FSCK,
    DQ_SCRIPT_COUNT
};

struct dq_script {
    const char *name;   /* file name without .lua */
    const char *sha1;   /* hex digest of text, as EVALSHA wants it */
    const char *text;   /* the full script, prelude included */
};

extern const struct dq_script dq_scripts[DQ_SCRIPT_COUNT];

#endif
