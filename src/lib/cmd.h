/*
 * A Redis command under construction: an argument vector for
 * redisCommandArgv / redisAsyncCommandArgv.  Strings pushed with cmd_push
 * are borrowed and must outlive the send; numbers are formatted into
 * storage the command owns.
 */
#ifndef DQ_CMD_H
#define DQ_CMD_H

#include <stddef.h>
#include <stdint.h>

#include "lib/keys.h"
#include "lib/scripts.h"

struct cmd {
    int argc;
    int cap;
    const char **argv;
    size_t *lens;
    char **owned;       /* blocks holding copied bytes, freed by cmd_free */
    int nowned;
    int owned_cap;
    size_t block_size;  /* the newest block's size ... */
    size_t block_left;  /* ... and the free bytes at its end */
    int oom;            /* an allocation failed: the command is unusable */
};

void cmd_init(struct cmd *c);
void cmd_free(struct cmd *c);

/* Start "EVALSHA <sha> 6 <the queue's keys>".  The keys are borrowed. */
void cmd_eval(struct cmd *c, enum dq_script_id s, const struct queue_keys *k);

/* Start "EVALSHA <sha> 8 <the queue's keys> <its schedule keys>", as the
 * recurring-schedule scripts take them.  The keys are borrowed. */
void cmd_eval_sched(struct cmd *c, enum dq_script_id s, const struct queue_keys *k,
                    const struct sched_keys *sk);

/* The key a cluster routes `c` by: the first key of an EVALSHA/EVAL
 * (when it has one), else the first argument; NULL for a command with
 * none (PING).  *len gets its length. */
const char *cmd_route_key(const struct cmd *c, size_t *len);

void cmd_push(struct cmd *c, const void *p, size_t len);
void cmd_push_str(struct cmd *c, const char *s);
/* Push a copy of `len` bytes, kept by the command until cmd_free. */
void cmd_push_copy(struct cmd *c, const void *p, size_t len);
/* Push an argument of `len` bytes that the caller writes into the memory
 * returned (owned by the command), or NULL when out of memory. */
char *cmd_push_space(struct cmd *c, size_t len);
void cmd_push_i64(struct cmd *c, int64_t v);
void cmd_push_double(struct cmd *c, double v);

#endif
