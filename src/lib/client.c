/*
 * libdelayq's connection: connect, authenticate, select, reconnect after a
 * broken connection, and run scripts with EVALSHA (loading them on
 * NOSCRIPT).  The only place in the library that talks to hiredis's
 * blocking API.
 */
#include "lib/client_internal.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/client_cluster.h"
#include "redis/redis_io.h"
#include "lib/scripts.h"

const char *dq_errmsg(const dq_client *c)
{
    return c ? c->err : "no client";
}

const char *dq_status_str(dq_status st)
{
    switch (st) {
    case DQ_OK: return "ok";
    case DQ_ERR_INVALID: return "invalid argument";
    case DQ_ERR_NOTFOUND: return "not found";
    case DQ_ERR_EXISTS: return "exists";
    case DQ_ERR_RUNNING: return "running";
    case DQ_ERR_DEAD: return "dead";
    case DQ_ERR_STALE: return "stale fence";
    case DQ_ERR_TOO_LARGE: return "payload too large";
    case DQ_ERR_CONNECT: return "connection failed";
    case DQ_ERR_AUTH: return "authentication failed";
    case DQ_ERR_TIMEOUT: return "timeout";
    case DQ_ERR_REDIS: return "redis error";
    case DQ_ERR_NOMEM: return "out of memory";
    case DQ_ERR_UNIQUE: return "finished within its dedupe window";
    }
    return "unknown status";
}

/*
 * Writing to a connection the server closed raises SIGPIPE, whose default
 * action kills the process; a library must not, so every call that writes
 * blocks SIGPIPE in the calling thread, consumes one it raised itself, and
 * restores the mask (the technique of libcurl and OpenSSL's examples).
 */
struct pipe_guard {
    sigset_t old;
    int was_pending;
    int blocked;                /* the mask was changed (and is to be restored) */
};

static void pipe_guard_enter(struct pipe_guard *g)
{
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE);
    /* Fails only for a bad argument; then SIGPIPE is as the caller set it
     * (a library does not log: the call goes on unguarded). */
    g->blocked = pthread_sigmask(SIG_BLOCK, &pipe, &g->old) == 0;
}

static void pipe_guard_leave(struct pipe_guard *g)
{
    if (!g->blocked)
        return;
    sigset_t pipe, pending;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    sigpending(&pending);
    if (!g->was_pending && sigismember(&pending, SIGPIPE)) {
        struct timespec zero = { 0, 0 };
        sigtimedwait(&pipe, NULL, &zero);
    }
    (void)pthread_sigmask(SIG_SETMASK, &g->old, NULL);   /* the mask it gave back */
}

/* (Re)open the connection with the client's settings. */
static dq_status client_open_unguarded(dq_client *c)
{
    dq_status st;
    redisContext *rc = c->sentinel
                           ? sentinel_connect(c->sentinel, &c->conn, &st, c->err, sizeof c->err)
                           : redis_conn_open(&c->conn, &st, c->err, sizeof c->err);
    if (!rc)
        return st;
    c->rc = rc;
    c->registered[0] = '\0';
    c->conn_gen++;   /* partition counts are read again */
    return DQ_OK;
}

static dq_status client_open(dq_client *c)
{
    struct pipe_guard g;
    pipe_guard_enter(&g);
    dq_status st = client_open_unguarded(c);
    pipe_guard_leave(&g);
    return st;
}

dq_client *dq_connect(const dq_options *opt, char *err, size_t errlen,
                      dq_status *status)
{
    dq_options defaults;
    if (!opt) {
        dq_options_init(&defaults);
        opt = &defaults;
    }
    dq_status st = DQ_ERR_NOMEM;
    dq_client *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    const char *prefix = opt->prefix ? opt->prefix : DQ_DEFAULT_PREFIX;
    const char *why = keys_check_prefix(prefix);
    if (why) {
        st = client_fail(c, DQ_ERR_INVALID, "%s", why);
        goto fail;
    }
    if (redis_conn_opts_copy(&c->conn, opt, c->err, sizeof c->err) < 0) {
        st = opt->user && !opt->password ? DQ_ERR_INVALID : DQ_ERR_NOMEM;
        goto fail;
    }
    c->prefix = strdup(prefix);
    c->max_payload = opt->max_payload ? opt->max_payload : DQ_DEFAULT_MAX_PAYLOAD;
    if (!c->prefix) {
        st = client_fail(c, DQ_ERR_NOMEM, "out of memory");
        goto fail;
    }
    if (opt->sentinel.master
        && !(c->sentinel = sentinel_new(opt, c->err, sizeof c->err))) {
        st = strstr(c->err, "out of memory") ? DQ_ERR_NOMEM : DQ_ERR_INVALID;
        goto fail;
    }
    c->jitter_seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)c;
    c->durability = opt->durability;
    c->replication_timeout_ms = opt->replication_timeout_ms > 0
                                ? opt->replication_timeout_ms
                                : DQ_DEFAULT_REPLICATION_TIMEOUT_MS;
    /* A write's reply then comes after its WAIT: the wait for it is the
     * command timeout plus the replication timeout. */
    if (c->durability == DQ_DURABILITY_REPLICATED && c->conn.command_timeout_ms > 0)
        c->conn.command_timeout_ms += c->replication_timeout_ms;
    st = opt->cluster ? cluster_setup(c, opt) : client_open(c);
    if (st != DQ_OK)
        goto fail;
    if (status)
        *status = DQ_OK;
    return c;

fail:
    if (c && err)
        snprintf(err, errlen, "%s", c->err);
    if (status)
        *status = st;
    dq_close(c);
    return NULL;
}

void dq_close(dq_client *c)
{
    if (!c)
        return;
    if (c->rc)
        redis_io_free(c->rc);
    cluster_free(c->cluster);
    redis_conn_opts_free(&c->conn);
    sentinel_free(c->sentinel);
    free(c->parts.e);
    free(c->prefix);
    free(c);
}

dq_status client_queue_keys(dq_client *c, const char *queue, struct queue_keys *k)
{
    const char *why = keys_check_queue(queue);
    if (why)
        return client_fail(c, DQ_ERR_INVALID, "%s", why);
    keys_build(k, c->prefix, queue);
    return DQ_OK;
}

/* A broken connection is re-made at the start of the next call, so that a
 * long-lived client survives a Redis restart. */
static dq_status ensure_open(dq_client *c)
{
    if (c->rc && !c->rc->err)
        return DQ_OK;
    if (c->rc) {
        redis_io_free(c->rc);
        c->rc = NULL;
    }
    return client_open(c);
}

/* The context broke during a command: report it and drop the context. */
static dq_status broken(dq_client *c, const char *what)
{
    dq_status st = redis_conn_context_error(&c->conn, c->rc, what, c->err, sizeof c->err);
    redis_io_free(c->rc);
    c->rc = NULL;
    return st;
}

static dq_status load_script(dq_client *c, enum dq_script_id s)
{
    dq_status st = client_script_load(c, c->rc, s);
    return st == DQ_ERR_CONNECT ? broken(c, "SCRIPT LOAD") : st;
}

/* How long a call has waited for a master, across its reconnects. */
struct failover_wait {
    int backoff_ms;
    int waited_ms;
};

#define FAILOVER_WAIT_INIT { REDIS_CONN_BACKOFF_MIN_MS, 0 }

/*
 * The server answered `r` (freed here) as a replica or while loading its
 * data: a failover by DNS or VIP left the connection on the old master,
 * or the server restarted.  Nothing ran, so the command may be sent again:
 * drop the connection and make it again after the jittered backoff, as
 * long as the connect timeout allows.  DQ_OK when a new connection is up;
 * else one error that names the reply (the caller's one report of it).
 */
static dq_status await_master(dq_client *c, redisReply *r, struct failover_wait *fw)
{
    char addr[300], text[256];
    redis_conn_describe(&c->conn, addr, sizeof addr);
    snprintf(text, sizeof text, "%s", r->str);
    freeReplyObject(r);
    redis_io_free(c->rc);
    c->rc = NULL;
    if (fw->waited_ms >= c->conn.connect_timeout_ms)
        return client_fail(c, DQ_ERR_CONNECT, "redis %s: %s (no master within %d ms)",
                           addr, text, fw->waited_ms);
    int ms = redis_conn_backoff_next(&fw->backoff_ms, (unsigned long)rand_r(&c->jitter_seed));
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
    fw->waited_ms += ms;
    return client_open_unguarded(c);
}

static dq_status run_unguarded(dq_client *c, struct cmd *cmd, int s,
                              redisReply **reply)
{
    *reply = NULL;
    if (cmd->oom)
        return client_fail(c, DQ_ERR_NOMEM, "out of memory building a command");
    dq_status st = ensure_open(c);
    if (st != DQ_OK)
        return st;
    const char *what = s >= 0 ? dq_scripts[s].name : cmd->argv[0];
    struct failover_wait fw = FAILOVER_WAIT_INIT;
    int loaded = 0;
    for (;;) {
        redisReply *r = redis_io_command(c->rc, cmd->argc, cmd->argv, cmd->lens);
        if (!r)
            return broken(c, what);
        if (redis_conn_is_failover(r)) {
            if ((st = await_master(c, r, &fw)) != DQ_OK)
                return st;
            loaded = 0;         /* a new server: the scripts may be missing */
            continue;
        }
        if (!loaded && s >= 0 && redis_conn_is_noscript(r)) {
            freeReplyObject(r);
            loaded = 1;
            if ((st = load_script(c, s)) != DQ_OK)
                return st;
            continue;
        }
        st = client_check_reply(c, r, what);
        if (st != DQ_OK) {
            freeReplyObject(r);
            return st;
        }
        c->err[0] = '\0';
        *reply = r;
        return DQ_OK;
    }
}

/* Write the commands whose reply slot is NULL, then read their replies.
 * Each command is built (when a builder is given) and written just before
 * the next is, so that Redis runs one while the client builds the next.
 * When a build runs out of memory, the commands already sent still have
 * their replies read, so that the connection stays in step. */
static dq_status pipeline_round(dq_client *c, struct cmd *cmds, size_t n,
                                redisReply **replies, const struct pipe_builder *b)
{
    dq_status st = DQ_OK;
    size_t sent = 0;
    for (; sent < n; sent++) {
        if (replies[sent])
            continue;
        struct cmd *cmd = &cmds[sent];
        if (b && cmd->argc == 0 && !cmd->oom)
            b->build(b->ctx, sent, cmd);
        if (cmd->oom) {
            st = client_fail(c, DQ_ERR_NOMEM, "out of memory building a command");
            break;
        }
        if (redisAppendCommandArgv(c->rc, cmd->argc, cmd->argv, cmd->lens) != REDIS_OK) {
            st = client_fail(c, DQ_ERR_NOMEM, "out of memory queueing commands");
            break;
        }
        if (redis_io_flush(c->rc) != REDIS_OK)
            return broken(c, "pipeline");
    }
    for (size_t i = 0; i < sent; i++) {
        if (replies[i])
            continue;
        void *r = NULL;
        if (redis_io_get_reply(c->rc, &r) != REDIS_OK)
            return broken(c, "pipeline");
        replies[i] = r;
    }
    return st;
}

/* Free the replies of commands that did not run (NOSCRIPT, or a failover
 * reply), leaving their slots NULL so that the next round sends them
 * again.  Returns how many were NOSCRIPT; *failover keeps the first
 * failover reply (the caller frees it). */
static size_t take_unrun(redisReply **replies, size_t n, redisReply **failover)
{
    size_t noscript = 0;
    *failover = NULL;
    for (size_t i = 0; i < n; i++) {
        int again = redis_conn_is_failover(replies[i]);
        noscript += !again && redis_conn_is_noscript(replies[i]);
        if (!again && !redis_conn_is_noscript(replies[i]))
            continue;
        if (again && !*failover)
            *failover = replies[i];
        else
            freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
    return noscript;
}

/* A WAIT last in the pipeline answers for the commands before it: when
 * any of them is to be sent again, so is it, after them. */
static void resend_wait(redisReply **replies, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++)
        if (!replies[i]) {
            if (replies[n - 1])
                freeReplyObject(replies[n - 1]);
            replies[n - 1] = NULL;
            return;
        }
}

static dq_status pipeline_unguarded(dq_client *c, struct cmd *cmds, size_t n,
                                   enum dq_script_id s, redisReply **replies,
                                   const struct pipe_builder *b, int trailing_wait)
{
    for (size_t i = 0; i < n; i++)
        replies[i] = NULL;
    dq_status st = ensure_open(c);
    struct failover_wait fw = FAILOVER_WAIT_INIT;
    int loaded = 0;
    while (st == DQ_OK) {
        st = pipeline_round(c, cmds, n, replies, b);
        if (st != DQ_OK)
            break;
        redisReply *failover;
        size_t missing = take_unrun(replies, n, &failover);
        if (trailing_wait)
            resend_wait(replies, n);
        if (failover) {
            st = await_master(c, failover, &fw);
            loaded = 0;
        } else if (missing > 0 && !loaded) {
            st = load_script(c, s);
            loaded = 1;
        } else {
            break;
        }
    }
    for (size_t i = 0; st == DQ_OK && i < n; i++)
        if (!replies[i])
            st = client_fail(c, DQ_ERR_REDIS, "redis keeps losing the %s script",
                             dq_scripts[s].name);
    if (st != DQ_OK)
        for (size_t i = 0; i < n; i++) {
            if (replies[i])
                freeReplyObject(replies[i]);
            replies[i] = NULL;
        }
    else
        c->err[0] = '\0';
    return st;
}

/* The two commands that register `queue`: SADD to the registry, and the
 * protocol marker on its meta hash, set once (HSETNX: an older version
 * written there stays, and is refused by part_lookup when too new). */
struct registration {
    char registry[KEYS_NAME_MAX];
    struct queue_keys k;
    char version[12];
    const char *sadd[3];
    const char *mark[4];
};

static void registration_init(struct registration *g, const dq_client *c, const char *queue)
{
    keys_registry(g->registry, sizeof g->registry, c->prefix);
    keys_build(&g->k, c->prefix, queue);
    snprintf(g->version, sizeof g->version, "%d", KEYS_PROTOCOL_VERSION);
    g->sadd[0] = "SADD";
    g->sadd[1] = g->registry;
    g->sadd[2] = queue;
    g->mark[0] = "HSETNX";
    g->mark[1] = g->k.key[4];
    g->mark[2] = KEYS_PROTOCOL_FIELD;
    g->mark[3] = g->version;
}

/* The registration in cluster mode: each command routed by its key (the
 * map's refresh forgets what was registered, as a reconnect does). */
static dq_status register_routed(dq_client *c, const char *queue)
{
    if (strcmp(c->registered, queue) == 0)
        return DQ_OK;
    struct registration g;
    registration_init(&g, c, queue);
    dq_status st = DQ_OK;
    for (int i = 0; i < 2 && st == DQ_OK; i++) {
        struct cmd cmd;
        cmd_init(&cmd);
        for (int a = 0; a < (i == 0 ? 3 : 4); a++)
            cmd_push_str(&cmd, i == 0 ? g.sadd[a] : g.mark[a]);
        redisReply *r = NULL;
        st = cluster_run(c, &cmd, -1, &r, 0);
        cmd_free(&cmd);
        if (r)
            freeReplyObject(r);
    }
    if (st == DQ_OK)
        snprintf(c->registered, sizeof c->registered, "%s", queue);
    return st;
}

/* Send both registration commands in one write and read both replies
 * into r[0], r[1] (NULL when the connection broke: the caller frees what
 * is there). */
static void registration_send(dq_client *c, struct registration *g, redisReply *r[2])
{
    r[0] = r[1] = NULL;
    if (redisAppendCommandArgv(c->rc, 3, g->sadd, NULL) != REDIS_OK
        || redisAppendCommandArgv(c->rc, 4, g->mark, NULL) != REDIS_OK
        || redis_io_flush(c->rc) != REDIS_OK)
        return;
    for (int i = 0; i < 2; i++) {
        void *got = NULL;
        if (redis_io_get_reply(c->rc, &got) != REDIS_OK)
            return;
        r[i] = got;
    }
}

static dq_status register_unguarded(dq_client *c, const char *queue)
{
    if (c->cluster)
        return register_routed(c, queue);
    /* Open first: a reconnect forgets what was registered, and the new
     * server (restarted, its data lost) may not have the queue. */
    dq_status st = ensure_open(c);
    if (st != DQ_OK)
        return st;
    if (strcmp(c->registered, queue) == 0)
        return DQ_OK;
    struct registration g;
    registration_init(&g, c, queue);
    redisReply *r[2];
    struct failover_wait fw = FAILOVER_WAIT_INIT;
    for (;;) {
        registration_send(c, &g, r);
        if (!r[0] || !r[1]) {
            if (r[0])
                freeReplyObject(r[0]);
            return broken(c, "SADD");
        }
        if (!redis_conn_is_failover(r[0]) && !redis_conn_is_failover(r[1]))
            break;
        /* await_master names (and frees) the failover reply */
        int which = redis_conn_is_failover(r[0]) ? 0 : 1;
        freeReplyObject(r[1 - which]);
        if ((st = await_master(c, r[which], &fw)) != DQ_OK)
            return st;
    }
    for (int i = 0; i < 2; i++) {
        if (st == DQ_OK && r[i]->type == REDIS_REPLY_ERROR)
            st = client_check_reply(c, r[i], i == 0 ? "SADD" : "HSETNX");
        freeReplyObject(r[i]);
    }
    if (st == DQ_OK)
        snprintf(c->registered, sizeof c->registered, "%s", queue);
    return st;
}

/* ---- replicated durability ---------------------------------------------- */

/*
 * client_pipeline_build under REPLICATED: the n commands and one WAIT in
 * one write (a copy of cmds[] with room for it, so that the caller's
 * arrays keep their size; what the builder made is handed back for the
 * caller to free).  The replies are given only when WAIT confirmed them.
 */
static dq_status pipeline_replicated(dq_client *c, struct cmd *cmds, size_t n,
                                     enum dq_script_id s, redisReply **replies,
                                     const struct pipe_builder *b, int keep_unconfirmed)
{
    struct cmd *all = calloc(n + 1, sizeof *all);
    redisReply **got = calloc(n + 1, sizeof *got);
    if (!all || !got) {
        free(all);
        free(got);
        return client_fail(c, DQ_ERR_NOMEM, "out of memory");
    }
    memcpy(all, cmds, n * sizeof *cmds);
    redis_conn_wait_cmd(&all[n], c->replication_timeout_ms);
    dq_status st = pipeline_unguarded(c, all, n + 1, s, got, b, 1);
    memcpy(cmds, all, n * sizeof *cmds);
    cmd_free(&all[n]);
    if (st == DQ_OK)
        st = client_check_wait(c, got[n]);
    /* Not confirmed, but the caller wants the replies (to undo them). */
    int keep = st == DQ_OK || (keep_unconfirmed && st == DQ_ERR_TIMEOUT && got[n]);
    for (size_t i = 0; i <= n; i++) {
        if (i < n)
            replies[i] = keep ? got[i] : NULL;
        if (got[i] && (i == n || !keep))
            freeReplyObject(got[i]);
    }
    free(all);
    free(got);
    return st;
}

/* client_run under REPLICATED: the command and WAIT in one write. */
static dq_status run_replicated(dq_client *c, struct cmd *cmd, int s, redisReply **reply,
                                int keep_unconfirmed)
{
    redisReply *r = NULL;
    dq_status st = pipeline_replicated(c, cmd, 1, (enum dq_script_id)s, &r, NULL,
                                       keep_unconfirmed);
    *reply = NULL;
    if (!r)
        return st;
    dq_status rst = client_check_reply(c, r, dq_scripts[s].name);
    if (rst != DQ_OK) {
        freeReplyObject(r);
        return rst;
    }
    *reply = r;
    return st;
}

dq_status client_run_unconfirmed(dq_client *c, struct cmd *cmd, int s, redisReply **reply)
{
    if (!client_wants_wait(c, s))
        return client_run(c, cmd, s, reply);
    struct pipe_guard g;
    pipe_guard_enter(&g);
    dq_status st = c->cluster ? cluster_run(c, cmd, s, reply, 1)
                              : run_replicated(c, cmd, s, reply, 1);
    pipe_guard_leave(&g);
    return st;
}

dq_status client_run(dq_client *c, struct cmd *cmd, int s, redisReply **reply)
{
    struct pipe_guard g;
    pipe_guard_enter(&g);
    dq_status st = c->cluster ? cluster_run(c, cmd, s, reply, 0)
                   : client_wants_wait(c, s) ? run_replicated(c, cmd, s, reply, 0)
                   : run_unguarded(c, cmd, s, reply);
    pipe_guard_leave(&g);
    return st;
}

dq_status client_pipeline(dq_client *c, struct cmd *cmds, size_t n,
                          enum dq_script_id s, redisReply **replies)
{
    return client_pipeline_build(c, cmds, n, s, replies, NULL, NULL);
}

dq_status client_pipeline_build(dq_client *c, struct cmd *cmds, size_t n,
                                enum dq_script_id s, redisReply **replies,
                                void (*build)(void *ctx, size_t i, struct cmd *cmd),
                                void *ctx)
{
    return client_pipeline_each(c, cmds, n, s, replies, build, ctx, NULL);
}

dq_status client_pipeline_each(dq_client *c, struct cmd *cmds, size_t n,
                               enum dq_script_id s, redisReply **replies,
                               void (*build)(void *ctx, size_t i, struct cmd *cmd),
                               void *ctx, dq_status *each)
{
    struct pipe_builder b = { build, ctx };
    struct pipe_guard g;
    pipe_guard_enter(&g);
    dq_status st = c->cluster
                   ? cluster_pipeline(c, cmds, n, (int)s, replies, build ? &b : NULL, 0, each)
                   : client_wants_wait(c, (int)s)
                   ? pipeline_replicated(c, cmds, n, s, replies, build ? &b : NULL, 0)
                   : pipeline_unguarded(c, cmds, n, s, replies, build ? &b : NULL, 0);
    pipe_guard_leave(&g);
    for (size_t i = 0; each && !c->cluster && i < n; i++)
        each[i] = st;
    return st;
}

dq_status client_register_queue(dq_client *c, const char *queue)
{
    struct pipe_guard g;
    pipe_guard_enter(&g);
    dq_status st = register_unguarded(c, queue);
    pipe_guard_leave(&g);
    return st;
}
