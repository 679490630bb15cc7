/*
 * Inside libdelayq: the blocking connection and how scripts run over it.
 * client.c owns the connection (client_cluster.c the connections of
 * cluster mode); client_reply.c judges replies for both; ops_*.c build
 * commands with proto.h and run them through client_run / client_pipeline.
 */
#ifndef DQ_CLIENT_INTERNAL_H
#define DQ_CLIENT_INTERNAL_H

#include <delayq/client.h>
#include <hiredis/hiredis.h>

#include "lib/cmd.h"
#include "lib/keys.h"
#include "redis/redis_conn.h"
#include "redis/sentinel.h"

/* A queue's partition count as the client read it (lib/partitions.c). */
struct part_entry {
    char queue[DQ_QUEUE_MAX + 1];
    unsigned n;             /* partitions, 1..KEYS_PARTITIONS_MAX */
    unsigned gen;           /* the connection generation it was read on */
    unsigned next_enqueue;  /* round robin of jobs without an id */
    unsigned next_claim;    /* round robin of the first partition claimed */
};

/* The queues a client works with are few: a plain array, in order. */
struct part_cache {
    struct part_entry *e;   /* owned; freed by dq_close */
    size_t n, cap;
};

struct dq_client {
    redisContext *rc;       /* NULL or broken: reconnect on the next call */
    struct redis_conn_opts conn;
    struct sentinel *sentinel; /* NULL: conn's address is the master's;
                                  else asked on every (re)connect */
    struct client_cluster *cluster; /* NULL: one server; else rc is unused
                                       and client_cluster.c routes */
    unsigned jitter_seed;   /* for the reconnect backoff's jitter */
    char *prefix;
    size_t max_payload;
    char registered[DQ_QUEUE_MAX + 1]; /* last queue added to the registry */
    unsigned conn_gen;      /* bumped at every (re)connect */
    struct part_cache parts; /* partition counts read (lib/partitions.h) */
    dq_durability durability;   /* REPLICATED: writes are followed by WAIT */
    int replication_timeout_ms; /* WAIT's timeout */
    char err[512];
};

/* ---- client_reply.c ---- */

/* Record a failure message and return `st`, so callers can write
 * `return client_fail(c, DQ_ERR_INVALID, "...")`. */
dq_status client_fail(dq_client *c, dq_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Judge a reply to `what` (a script or command name): DQ_OK, or an error
 * reply as DQ_ERR_AUTH / DQ_ERR_REDIS with its text in c->err. */
dq_status client_check_reply(dq_client *c, const redisReply *r, const char *what);

/* Whether script `s` (-1: a plain command) is followed by WAIT. */
int client_wants_wait(const dq_client *c, int s);

/* Judge WAIT's reply: DQ_OK when a replica has the writes, else
 * DQ_ERR_TIMEOUT ("not replicated within N ms") or DQ_ERR_REDIS. */
dq_status client_check_wait(dq_client *c, const redisReply *r);

/* SCRIPT LOAD script `s` on `rc`: DQ_OK, DQ_ERR_REDIS (refused, the text
 * in c->err), or DQ_ERR_CONNECT when the context broke (rc->err set, the
 * caller reports it and drops the context). */
dq_status client_script_load(dq_client *c, redisContext *rc, enum dq_script_id s);

/* ---- client.c ---- */

/* Check the queue name and build its keys; DQ_ERR_INVALID with a message. */
dq_status client_queue_keys(dq_client *c, const char *queue,
                            struct queue_keys *k);

/*
 * Send one command and return its reply in *reply (free it with
 * freeReplyObject).  `s` is the script an EVALSHA runs, or -1 for a plain
 * command.  An EVALSHA that meets NOSCRIPT (Redis restarted, or SCRIPT
 * FLUSH) loads the script and is sent once more: the script did not run, so
 * that is safe.  Error replies become DQ_ERR_REDIS with the text.
 * Under DQ_DURABILITY_REPLICATED a script that writes is followed by WAIT
 * in the same write, and the call fails with DQ_ERR_TIMEOUT ("not
 * replicated within N ms") when no replica confirmed it in time.
 */
dq_status client_run(dq_client *c, struct cmd *cmd, int s, redisReply **reply);

/*
 * client_run for a write that must be undone when no replica confirmed
 * it (durability REPLICATED): then DQ_ERR_TIMEOUT with the reply still in
 * *reply (when the script succeeded), for the caller to undo and free.
 * Otherwise as client_run.
 */
dq_status client_run_unconfirmed(dq_client *c, struct cmd *cmd, int s, redisReply **reply);

/*
 * Send `n` commands in one write and read their replies into replies[]
 * (all NULL on failure).  EVALSHA commands of script `s` that meet NOSCRIPT
 * are re-sent after loading it.  Error replies are left in replies[] for
 * the caller to judge one by one.  Under DQ_DURABILITY_REPLICATED one WAIT
 * after the last command covers them all (as client_run says).
 */
dq_status client_pipeline(dq_client *c, struct cmd *cmds, size_t n,
                          enum dq_script_id s, redisReply **replies);

/* client_pipeline for commands built on the way: `build` fills cmds[i]
 * (left empty by the caller) just before it is sent, so that the client
 * builds the next command while Redis runs the last. */
dq_status client_pipeline_build(dq_client *c, struct cmd *cmds, size_t n,
                                enum dq_script_id s, redisReply **replies,
                                void (*build)(void *ctx, size_t i, struct cmd *cmd),
                                void *ctx);

/* client_pipeline_build that goes on past a master out of reach (a
 * cluster: each master's commands are on their own; one server: all share
 * its fate).  each[i] gets command i's status: DQ_OK with its reply in
 * replies[i], or the failure that left replies[i] NULL.  Returns the first
 * failure, or DQ_OK. */
dq_status client_pipeline_each(dq_client *c, struct cmd *cmds, size_t n,
                               enum dq_script_id s, redisReply **replies,
                               void (*build)(void *ctx, size_t i, struct cmd *cmd),
                               void *ctx, dq_status *each);

/* Builds cmds[i] in place just before it is sent (see
 * client_pipeline_build). */
struct pipe_builder {
    void (*build)(void *ctx, size_t i, struct cmd *cmd);
    void *ctx;
};

/* Add `queue` to the registry of queue names (once per connection). */
dq_status client_register_queue(dq_client *c, const char *queue);

#endif
