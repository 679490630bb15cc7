/*
 * The conformance driver: the cases of cases.json run through libdelayq's
 * public API (include/delayq/client.h), with Redis itself read directly
 * (hiredis) for the steps that look at what it holds.
 */
#ifndef CONFORMANCE_DRIVER_H
#define CONFORMANCE_DRIVER_H

#include <delayq/client.h>
#include <hiredis/hiredis.h>

#include "json.h"

#define DRIVER_PREFIX "dq"

/* One run of one case: its queue, partition count, connections. */
struct case_run {
    const char *queue;
    unsigned nparts;
    dq_client *c;               /* NULL when connecting failed: */
    dq_status connect_status;   /* ... then every call fails with this */
    char connect_err[256];
    redisContext *raw;          /* the plain server, for direct reads */
    redisContext *sub;          /* subscribed to the wake channels, or NULL */
};

/* The outcome of a call: a result (owned by the caller) or an error. */
struct outcome {
    struct jv *result;
    dq_status status;           /* DQ_OK: result is set */
    char msg[512];
};

/* Run one step's call (calls.c).  The step's args are in `args`. */
void call_run(struct case_run *r, const char *name, const struct jv *args,
              struct outcome *out);

/* The direct reads (redis_direct.c). */
struct jv *direct_state(struct case_run *r);
struct jv *direct_record(struct case_run *r, const char *id);
struct jv *direct_command(struct case_run *r, const struct jv *argv);
struct jv *direct_wake_messages(struct case_run *r);
int direct_subscribe(struct case_run *r, const char *sock);

/* The code name of a status ("invalid", "notfound", ...) (calls.c). */
const char *driver_status_name(dq_status st);

/* The partition of a job id, as docs/protocol.md says (redis_direct.c). */
unsigned direct_partition_of(const char *id, unsigned nparts);

/* The key tag of partition p: Q, or Q:p. */
void direct_tag(const struct case_run *r, unsigned p, char *buf, size_t len);

#endif
