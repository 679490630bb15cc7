#include "daemon/rconn.h"

#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/slots.h"
#include "lib/redis_conn.h"
#include "lib/scripts.h"

struct rconn {
    struct event_base *base;
    redisAsyncContext *ac;      /* NULL while down; hiredis frees it */
    int up;                     /* handshake done */
    int dropping;               /* to be dropped by the connect timer */
    int demoted;                /* dropped on a failover reply; no master yet */
    char *name;
    struct redis_conn_opts opt;
    struct rconn_events ev;
    struct event *connect_timer; /* deadline of connect + handshake */
    struct event *retry_timer;   /* next reconnect attempt */
    int backoff_ms;
    int failures;               /* attempts since the connection was last up */
    int pending;                /* handshake replies still expected */
    char *channel;              /* subscribed channel, or NULL */
    rconn_message_fn on_message;
    void *message_arg;
    uint64_t *reconnects;       /* counted on each re-connect; may be NULL */
    int was_ever_up;
    char last_failure[320];     /* why the connection last failed */
    int replicated;             /* writes wait for a replica (WAIT) */
    int replication_timeout_ms; /* WAIT's timeout */
    int unreplicated;           /* the last WAIT timed out (logged once) */
};

/* One request in flight: the formatted command is kept so that it can be
 * re-sent after NOSCRIPT. */
struct request {
    struct rconn *rc;
    rconn_reply_fn fn;
    void *arg;
    char *formatted;
    int len;
    int script;
    int resent;
    struct event *deadline;
    redisAsyncContext *ac;      /* the connection it was sent on */
};

static void schedule_reconnect(struct rconn *rc);

/* Note a failure: logged on the first failure of an outage only. */
static void note_failure(struct rconn *rc, const char *why)
{
    snprintf(rc->last_failure, sizeof rc->last_failure, "%s", why);
    if (rc->failures++ == 0) {
        char addr[300];
        redis_conn_describe(&rc->opt, addr, sizeof addr);
        log_warn("redis %s (%s connection): %s; reconnecting", addr, rc->name, why);
    }
}

/* Tear the context down now (from a timer, never from a hiredis callback).
 * Pending requests get a NULL reply through hiredis.  `why` is NULL when
 * drop_soon noted the failure already. */
static void drop(struct rconn *rc, const char *why)
{
    redisAsyncContext *ac = rc->ac;
    int was_up = rc->up;
    rc->ac = NULL;
    rc->up = 0;
    rc->dropping = 0;
    evtimer_del(rc->connect_timer);
    if (why)
        note_failure(rc, why);
    if (ac)
        redisAsyncFree(ac);
    if (was_up && rc->ev.on_down)
        rc->ev.on_down(rc, rc->ev.arg);
    schedule_reconnect(rc);
}

/* Note the failure now and drop the connection from the connect timer at
 * once: inside a hiredis callback the context must not be freed.  Until
 * then no request is taken. */
static void drop_soon(struct rconn *rc, const char *why)
{
    if (rc->dropping)
        return;
    rc->dropping = 1;
    note_failure(rc, why);
    struct timeval now = { 0, 0 };
    evtimer_add(rc->connect_timer, &now);
}

/* The outage is over: say so once, and start the next one's backoff from
 * the minimum. */
static void note_recovery(struct rconn *rc)
{
    if (rc->failures > 0) {
        char addr[300];
        redis_conn_describe(&rc->opt, addr, sizeof addr);
        log_info("redis %s (%s connection): connected again after %d attempt%s",
                 addr, rc->name, rc->failures, rc->failures == 1 ? "" : "s");
    }
    rc->failures = 0;
    rc->demoted = 0;
    rc->backoff_ms = REDIS_CONN_BACKOFF_MIN_MS;
}

/* ---- requests ------------------------------------------------------------ */

static void request_free(struct request *req)
{
    if (req->deadline)
        event_free(req->deadline);
    free(req->formatted);
    free(req);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct request *req = arg;
    struct rconn *rc = req->rc;
    if (rc->ac == req->ac && rc->ac)
        drop(rc, "no reply within the command timeout");
}

static void on_reply(redisAsyncContext *ac, void *r, void *privdata);

static int request_write(struct request *req)
{
    struct rconn *rc = req->rc;
    req->ac = rc->ac;
    if (redisAsyncFormattedCommand(rc->ac, on_reply, req, req->formatted,
                                   (size_t)req->len) != REDIS_OK)
        return -1;
    if (rc->opt.command_timeout_ms > 0) {
        /* Under "replicated" any request may queue behind a WAIT. */
        int ms = rc->opt.command_timeout_ms + (rc->replicated ? rc->replication_timeout_ms : 0);
        struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
        evtimer_add(req->deadline, &tv);
    }
    return 0;
}

static void send_script_load(struct rconn *rc, int script);

static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    (void)ac;
    struct request *req = privdata;
    struct rconn *rc = req->rc;
    redisReply *reply = r;
    evtimer_del(req->deadline);
    /* The script vanished (SCRIPT FLUSH): load it and send once more; the
     * script did not run, so this is safe. */
    if (redis_conn_is_noscript(reply) && !req->resent && req->script >= 0 && rc->ac == req->ac
        && rc->up && !rc->dropping) {
        req->resent = 1;
        send_script_load(rc, req->script);
        if (request_write(req) == 0)
            return;
        reply = NULL;
    }
    /* The server is a replica now, or loading (a failover moved the master
     * elsewhere): nothing ran, so the caller sees a lost connection and
     * sends again once a new one is up; the outage is logged once. */
    if (redis_conn_is_failover(reply) && rc->ac) {
        rc->demoted = 1;
        drop_soon(rc, reply->str);
        reply = NULL;
    } else if (reply && rc->demoted) {
        note_recovery(rc);
    }
    if (reply && reply->type == REDIS_REPLY_ERROR)
        log_warn("redis error (%s connection): %s", rc->name, reply->str);
    req->fn(rc, reply, req->arg);
    request_free(req);
}

const char *rconn_last_failure(const struct rconn *rc)
{
    return rc->last_failure[0] ? rc->last_failure : "connection to Redis lost";
}

static int send_replicated(struct rconn *rc, const struct cmd *cmd, int script,
                           rconn_reply_fn fn, void *arg);

/* rconn_send without WAIT. */
static int send_request(struct rconn *rc, const struct cmd *cmd, int script,
                        rconn_reply_fn fn, void *arg)
{
    if (!rc->up || rc->dropping || !rc->ac || cmd->oom)
        return -1;
    struct request *req = calloc(1, sizeof *req);
    if (!req)
        return -1;
    req->rc = rc;
    req->fn = fn;
    req->arg = arg;
    req->script = script;
    req->len = redisFormatCommandArgv(&req->formatted, cmd->argc, cmd->argv, cmd->lens);
    req->deadline = evtimer_new(rc->base, on_deadline, req);
    if (req->len < 0 || !req->deadline || request_write(req) < 0) {
        request_free(req);
        return -1;
    }
    return 0;
}

int rconn_send(struct rconn *rc, const struct cmd *cmd, int script,
               rconn_reply_fn fn, void *arg)
{
    if (rc->replicated && redis_conn_script_writes(script))
        return send_replicated(rc, cmd, script, fn, arg);
    return send_request(rc, cmd, script, fn, arg);
}

/* ---- connecting ---------------------------------------------------------- */

static void handshake_done(struct rconn *rc)
{
    evtimer_del(rc->connect_timer);
    /* After a failover reply the outage lasts until a server takes a
     * command: a replica accepts the handshake too. */
    if (!rc->demoted)
        note_recovery(rc);
    rc->up = 1;
    if (rc->was_ever_up && rc->reconnects)
        slot_add(rc->reconnects, 1);
    rc->was_ever_up = 1;
    if (rc->ev.on_up)
        rc->ev.on_up(rc, rc->ev.arg);
}

/* Replies to the handshake (AUTH, SELECT, SCRIPT LOAD, SUBSCRIBE's first
 * reply): any error fails the connection attempt. */
static void on_handshake_reply(redisAsyncContext *ac, void *r, void *privdata)
{
    struct rconn *rc = privdata;
    redisReply *reply = r;
    if (rc->ac != ac || !reply)
        return;
    if (reply->type == REDIS_REPLY_ERROR) {
        char why[300];
        snprintf(why, sizeof why, "handshake refused: %s", reply->str);
        drop_soon(rc, why);
        return;
    }
    if (--rc->pending == 0 && !rc->dropping)
        handshake_done(rc);
}

static void on_message(redisAsyncContext *ac, void *r, void *privdata)
{
    struct rconn *rc = privdata;
    redisReply *reply = r;
    if (rc->ac != ac || !reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 3)
        return;
    const redisReply *kind = reply->element[0];
    if (kind->type == REDIS_REPLY_STRING && strcmp(kind->str, "subscribe") == 0) {
        if (--rc->pending == 0)
            handshake_done(rc);
        return;
    }
    const redisReply *payload = reply->element[2];
    if (kind->type == REDIS_REPLY_STRING && strcmp(kind->str, "message") == 0
        && payload->type == REDIS_REPLY_STRING && rc->on_message)
        rc->on_message(rc, payload->str, payload->len, rc->message_arg);
}

static void send_script_load(struct rconn *rc, int script)
{
    redisAsyncCommand(rc->ac, NULL, NULL, "SCRIPT LOAD %s", dq_scripts[script].text);
}

static void start_handshake(struct rconn *rc)
{
    redisAsyncContext *ac = rc->ac;
    rc->pending = 0;
    const char *auth[3];
    int argc = redis_conn_auth_argv(&rc->opt, auth);
    if (argc) {
        rc->pending++;
        redisAsyncCommandArgv(ac, on_handshake_reply, rc, argc, auth, NULL);
    }
    if (rc->opt.db) {
        rc->pending++;
        redisAsyncCommand(ac, on_handshake_reply, rc, "SELECT %d", rc->opt.db);
    }
    if (rc->channel) {
        rc->pending++;
        redisAsyncCommand(ac, on_message, rc, "SUBSCRIBE %s", rc->channel);
        return;
    }
    for (int s = 0; s < DQ_SCRIPT_COUNT; s++) {
        rc->pending++;
        redisAsyncCommand(ac, on_handshake_reply, rc, "SCRIPT LOAD %s", dq_scripts[s].text);
    }
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    struct rconn *rc = ac->data;
    if (rc->ac != ac)
        return;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this callback. */
        rc->ac = NULL;
        evtimer_del(rc->connect_timer);
        note_failure(rc, ac->errstr);
        schedule_reconnect(rc);
        return;
    }
    if (!rc->opt.unix_path && rc->opt.keepalive)
        redisEnableKeepAlive((redisContext *)&ac->c);
    start_handshake(rc);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    struct rconn *rc = ac->data;
    (void)status;
    if (rc->ac != ac)
        return;         /* we dropped it ourselves */
    int was_up = rc->up;
    rc->ac = NULL;      /* hiredis frees the context after this callback */
    rc->up = 0;
    evtimer_del(rc->connect_timer);
    note_failure(rc, ac->errstr[0] ? ac->errstr : "connection closed");
    if (was_up && rc->ev.on_down)
        rc->ev.on_down(rc, rc->ev.arg);
    schedule_reconnect(rc);
}

static void connect_now(struct rconn *rc)
{
    rc->dropping = 0;   /* a drop_soon the server beat to it is moot */
    redisAsyncContext *ac = rc->opt.unix_path ? redisAsyncConnectUnix(rc->opt.unix_path)
                                              : redisAsyncConnect(rc->opt.host, rc->opt.port);
    if (!ac) {
        note_failure(rc, "out of memory");
        schedule_reconnect(rc);
        return;
    }
    if (ac->err) {
        note_failure(rc, ac->errstr);
        redisAsyncFree(ac);
        schedule_reconnect(rc);
        return;
    }
    ac->data = rc;
    rc->ac = ac;
    /* The adapter first, then the callbacks (hiredis's own order). */
    redisLibeventAttach(ac, rc->base);
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    struct timeval tv = { rc->opt.connect_timeout_ms / 1000,
                          (rc->opt.connect_timeout_ms % 1000) * 1000 };
    evtimer_add(rc->connect_timer, &tv);
}

static void on_retry_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    connect_now(arg);
}

static void on_connect_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rconn *rc = arg;
    if (rc->ac && rc->dropping)
        drop(rc, NULL);
    else if (rc->ac)
        drop(rc, "connect or handshake timed out");
}

/* Next attempt after the backoff, with +-25% jitter so that many workers
 * do not reconnect in step after a Redis restart. */
static void schedule_reconnect(struct rconn *rc)
{
    int ms = redis_conn_backoff_next(&rc->backoff_ms, (unsigned long)random());
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    evtimer_add(rc->retry_timer, &tv);
}

struct rconn *rconn_new(struct event_base *base, const dq_options *opt,
                        const char *name, const struct rconn_events *ev)
{
    struct rconn *rc = calloc(1, sizeof *rc);
    if (!rc)
        return NULL;
    char err[128];
    if (redis_conn_opts_copy(&rc->opt, opt, err, sizeof err) < 0) {
        log_err("redis connection %s: %s", name, err);
        free(rc);
        return NULL;
    }
    rc->base = base;
    rc->name = strdup(name);
    rc->backoff_ms = REDIS_CONN_BACKOFF_MIN_MS;
    rc->replicated = opt->durability == DQ_DURABILITY_REPLICATED;
    rc->replication_timeout_ms = opt->replication_timeout_ms > 0
                                 ? opt->replication_timeout_ms
                                 : DQ_DEFAULT_REPLICATION_TIMEOUT_MS;
    if (ev)
        rc->ev = *ev;
    rc->connect_timer = evtimer_new(base, on_connect_timer, rc);
    rc->retry_timer = evtimer_new(base, on_retry_timer, rc);
    if (!rc->name || !rc->connect_timer || !rc->retry_timer) {
        rconn_free(rc);
        return NULL;
    }
    return rc;
}

struct rconn *rconn_from_conf(struct event_base *base, const struct redis_conf *conf,
                              const char *name, const struct rconn_events *ev)
{
    dq_options opt;
    redis_conf_to_options(conf, &opt);
    return rconn_new(base, &opt, name, ev);
}

void rconn_start(struct rconn *rc)
{
    if (!rc->ac)
        connect_now(rc);
}

int rconn_is_up(const struct rconn *rc)
{
    return rc->up && !rc->dropping;
}

void rconn_subscribe(struct rconn *rc, const char *channel, rconn_message_fn fn,
                     void *arg)
{
    free(rc->channel);
    rc->channel = strdup(channel);
    rc->on_message = fn;
    rc->message_arg = arg;
}

void rconn_count_reconnects(struct rconn *rc, uint64_t *counter)
{
    rc->reconnects = counter;
}

void rconn_free(struct rconn *rc)
{
    if (!rc)
        return;
    redisAsyncContext *ac = rc->ac;
    rc->ac = NULL;
    rc->up = 0;
    rc->ev.on_down = NULL;
    if (ac)
        redisAsyncFree(ac);
    if (rc->connect_timer)
        event_free(rc->connect_timer);
    if (rc->retry_timer)
        event_free(rc->retry_timer);
    free(rc->name);
    redis_conn_opts_free(&rc->opt);
    free(rc->channel);
    free(rc);
}

void rconn_close_in_child(struct rconn *rc)
{
    if (rc && rc->ac && rc->ac->c.fd >= 0)
        close(rc->ac->c.fd);
}

/* ---- replicated durability ----------------------------------------------- */

/*
 * Under durability "replicated" a script that writes is sent with
 * "WAIT 1 <timeout>" right behind it on the same connection (pipelined:
 * Redis runs one, then the other), and its caller hears of it only once
 * WAIT has answered: the write's reply when a replica has it, a
 * NOTREPLICATED error reply when none confirmed it in time (the write is
 * on the master only, and a failover now would lose it), NULL when the
 * connection was lost before both replies came.  Callers already treat an
 * error reply as "not done, try again later", which is what it is.
 */
struct replicated_req {
    struct rconn *rc;
    rconn_reply_fn fn;
    void *arg;
    redisReply *reply;          /* the write's, copied, until WAIT answers */
    int write_done;             /* the write's reply (or NULL) came */
    int lost;                   /* ... and it was NULL */
    int wait_unsent;            /* no WAIT could be queued behind it */
};

/* A deep copy of `r`: hiredis frees a reply when its callback returns,
 * and the write's must wait for WAIT's.  NULL when out of memory. */
static redisReply *reply_copy(const redisReply *r)
{
    redisReply *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->type = r->type;
    c->integer = r->integer;
    if (r->str) {
        c->str = malloc(r->len + 1);
        if (!c->str)
            goto fail;
        memcpy(c->str, r->str, r->len + 1);
        c->len = r->len;
    }
    if (r->element) {
        c->element = calloc(r->elements ? r->elements : 1, sizeof *c->element);
        if (!c->element)
            goto fail;
        for (size_t i = 0; i < r->elements; i++, c->elements = i)
            if (r->element[i] && !(c->element[i] = reply_copy(r->element[i])))
                goto fail;
    }
    return c;
fail:
    freeReplyObject(c);
    return NULL;
}

/* The error reply a write not replicated in time is answered with. */
static redisReply *unreplicated_reply(const struct rconn *rc)
{
    redisReply *r = calloc(1, sizeof *r);
    char text[160];
    int len = snprintf(text, sizeof text, "%s not replicated within %d ms (the write is "
                       "on the master only)", RCONN_NOT_REPLICATED, rc->replication_timeout_ms);
    if (r && (r->str = strdup(text)) != NULL) {
        r->type = REDIS_REPLY_ERROR;
        r->len = (size_t)len;
        return r;
    }
    free(r);
    return NULL;
}

/* Log the start and the end of a spell of writes not replicated, once. */
static void note_replication(struct rconn *rc, int replicated)
{
    char addr[300];
    if (replicated == !rc->unreplicated)
        return;
    rc->unreplicated = !replicated;
    redis_conn_describe(&rc->opt, addr, sizeof addr);
    if (replicated)
        log_info("redis %s (%s connection): writes reach a replica again", addr, rc->name);
    else
        log_warn("redis %s (%s connection): a write was not replicated within %d ms; "
                 "it is not taken as done", addr, rc->name, rc->replication_timeout_ms);
}

/* Hand the caller its answer: `verdict` is WAIT's count of replicas, or
 * -1 when the connection was lost. */
static void replicated_finish(struct replicated_req *d, long long verdict)
{
    struct rconn *rc = d->rc;
    redisReply *answer = NULL;
    if (verdict >= 1 && !d->lost && d->reply) {
        note_replication(rc, 1);
        answer = d->reply;
        d->reply = NULL;
    } else if (verdict >= 0 && !d->lost) {
        note_replication(rc, 0);
        answer = unreplicated_reply(rc);
    }
    d->fn(rc, answer, d->arg);
    if (answer)
        freeReplyObject(answer);
    if (d->reply)
        freeReplyObject(d->reply);
    free(d);
}

static void on_replicated_write(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct replicated_req *d = arg;
    d->write_done = 1;
    d->lost = !reply;
    if (reply && !(d->reply = reply_copy(reply)))
        d->lost = 1;            /* out of memory: as good as lost */
    if (d->wait_unsent)
        replicated_finish(d, 0);
}

static int send_wait(struct replicated_req *d);

static void on_replicated_wait(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct replicated_req *d = arg;
    /* WAIT answered before the write: the write was sent again after it
     * (NOSCRIPT), so this WAIT does not cover it; one more does. */
    if (reply && !d->write_done) {
        if (send_wait(d) < 0)
            d->wait_unsent = 1;     /* on_replicated_write finishes */
        return;
    }
    if (!reply)
        replicated_finish(d, -1);
    else
        replicated_finish(d, reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0);
}

static int send_wait(struct replicated_req *d)
{
    struct cmd w;
    redis_conn_wait_cmd(&w, d->rc->replication_timeout_ms);
    int rc = send_request(d->rc, &w, -1, on_replicated_wait, d);
    cmd_free(&w);
    return rc;
}

static int send_replicated(struct rconn *rc, const struct cmd *cmd, int script,
                           rconn_reply_fn fn, void *arg)
{
    struct replicated_req *d = calloc(1, sizeof *d);
    if (!d)
        return -1;
    d->rc = rc;
    d->fn = fn;
    d->arg = arg;
    if (send_request(rc, cmd, script, on_replicated_write, d) < 0) {
        free(d);
        return -1;
    }
    if (send_wait(d) < 0)
        d->wait_unsent = 1;     /* answered as not replicated */
    return 0;
}

int rconn_is_not_replicated(const redisReply *r)
{
    size_t n = strlen(RCONN_NOT_REPLICATED);
    return r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, RCONN_NOT_REPLICATED, n) == 0;
}
