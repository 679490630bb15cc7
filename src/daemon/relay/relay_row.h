/*
 * One row of an outbox table as the relay holds it: read by relay_pg.c,
 * applied to Redis by relay_apply.c, then deleted, or moved to the dead
 * table with its reason, by relay_pg.c in the same transaction.
 */
#ifndef DQ_RELAY_ROW_H
#define DQ_RELAY_ROW_H

#include <delayq/client.h>
#include <stddef.h>
#include <stdint.h>

enum relay_op { RELAY_ADD, RELAY_CANCEL, RELAY_REPLACE };

/* What became of a row: applied (or found applied already: deleted),
 * refused for good (moved to the dead table), or held back in the table
 * while its partition's master is out of reach (relay_defer.h). */
enum relay_outcome { ROW_APPLIED, ROW_DEAD, ROW_HELD };

#define RELAY_REASON_MAX 300

struct relay_row {
    int64_t id;
    enum relay_op op;
    const char *queue;          /* these point into the batch's result */
    const char *job_id;         /* "" when NULL in the table */
    const char *type;           /* "" when NULL */
    unsigned char *payload;     /* PQunescapeBytea's (PQfreemem) */
    size_t payload_len;
    int64_t at_ms;              /* run_at, Unix ms; -1: none */
    int64_t delay_ms;           /* what is left of created_at + delay */
    int priority;               /* 0..9; -1: normal */
    int max_attempts;           /* 0: the handler's */
    int64_t expire_at_ms;       /* -1: none */
    int64_t ttl_ms;             /* -1: none */
    char name[DQ_ID_MAX + 1];   /* the job's id: job_id, or SOURCE:ROW_ID */
    enum relay_outcome outcome;
    int replayed;               /* an add found applied already (a batch
                                   applied again after a restart) */
    char reason[RELAY_REASON_MAX]; /* ROW_DEAD: why; ROW_HELD: what failed */
    const char *qname;          /* its queue's name in the configuration
                                   (which outlives the batch) */
    unsigned part;              /* the job's partition of its queue */
    int newly_held;             /* ROW_HELD: its partition was not known
                                   to be out of reach before this row */
};

/* A batch: the rows of one transaction, in row id (commit) order. */
struct relay_batch {
    struct relay_row *rows;
    size_t n;
    void *result;               /* the PGresult the strings point into */
};

#endif
