#include "redis/rconn.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"
#include "redis/rconn_channels.h"
#include "redis/rconn_cluster.h"
#include "redis/rconn_io.h"
#include "redis/rconn_wait.h"
#include "daemon/slots.h"
#include "redis/cluster_map.h"
#include "redis/cluster_policy.h"
#include "redis/redis_conn.h"
#include "lib/scripts.h"
#include "redis/sentinel.h"

struct rconn {
    struct event_base *base;
    struct rconn_io *io;        /* NULL while down; frees itself on failure */
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
    struct rconn_channels channels; /* subscribed on every connect */
    rconn_message_fn on_message;
    void *message_arg;
    uint64_t *reconnects;       /* counted on each re-connect; may be NULL */
    int was_ever_up;
    char last_failure[320];     /* why the connection last failed */
    int replicated;             /* writes wait for a replica (WAIT) */
    struct rconn_replication repl; /* how (rconn_wait.c) */
    int64_t down_since_ms;      /* start of the outage (monotonic) */
    struct sentinel *sentinel;  /* NULL: opt names the server; else asked
                                   before every attempt (locate_master) */
    struct event *switch_ev;    /* SIGUSR2: look the master up now */
    int located;                /* the sentinels named a master once */
    struct rcluster *cluster;   /* cluster mode: routes to node rconns
                                   (rconn_cluster.c); the rest is unused */
    int cluster_node;           /* one of those nodes: its outages and
                                   redirections are logged by the routing
                                   connection, not here */
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
    int64_t due_ms;             /* monotonic: when the deadline is due */
    struct rconn_io *io;        /* the connection it was sent on */
};

/* A deadline that fires later than this after it was due fired late. */
#define DEADLINE_SLACK_MS 50

static void schedule_reconnect(struct rconn *rc);

/* Where the connection goes, for messages: behind Sentinel, before the
 * sentinels named any master, the master's name (opt holds a default). */
static void describe(const struct rconn *rc, char *buf, size_t len)
{
    if (rc->sentinel && !rc->located)
        snprintf(buf, len, "master '%s'", rc->sentinel->master);
    else
        redis_conn_describe(&rc->opt, buf, len);
}

/* Note a failure: logged on the first failure of an outage only (a
 * cluster's node: by the routing connection, rconn_cluster.c). */
static void note_failure(struct rconn *rc, const char *why)
{
    snprintf(rc->last_failure, sizeof rc->last_failure, "%s", why);
    if (rc->failures++ == 0) {
        rc->down_since_ms = slots_now_ms();
        if (rc->cluster_node)
            return;
        char addr[300];
        describe(rc, addr, sizeof addr);
        log_warn("redis %s (%s connection): %s; reconnecting", addr, rc->name, why);
    }
}

/* Tear the connection down now (from a timer, never from one of its
 * callbacks).  Pending requests get a NULL reply through rconn_io.  `why`
 * is NULL when drop_soon noted the failure already. */
static void drop(struct rconn *rc, const char *why)
{
    struct rconn_io *io = rc->io;
    int was_up = rc->up;
    rc->io = NULL;
    rc->up = 0;
    rc->dropping = 0;
    evtimer_del(rc->connect_timer);
    if (why)
        note_failure(rc, why);
    if (io)
        rconn_io_free(io);
    if (was_up && rc->ev.on_down)
        rc->ev.on_down(rc, rc->ev.arg);
    schedule_reconnect(rc);
}

/* Note the failure now and drop the connection from the connect timer at
 * once: inside one of its callbacks the connection must not be freed.
 * Until then no request is taken. */
static void drop_soon(struct rconn *rc, const char *why)
{
    if (rc->dropping)
        return;
    rc->dropping = 1;
    note_failure(rc, why);
    struct timeval now = { 0, 0 };
    if (evtimer_add(rc->connect_timer, &now) < 0) {
        log_err("redis (%s connection): cannot arm a timer; dropping from the loop", rc->name);
        event_active(rc->connect_timer, EV_TIMEOUT, 0);     /* allocates nothing */
    }
}

/* The outage is over: say so once, and start the next one's backoff from
 * the minimum. */
static void note_recovery(struct rconn *rc)
{
    if (rc->failures > 0 && !rc->cluster_node) {
        char addr[300];
        redis_conn_describe(&rc->opt, addr, sizeof addr);
        log_info("redis %s (%s connection): connected again after %d attempt%s "
                 "(outage %.1f s)", addr, rc->name, rc->failures,
                 rc->failures == 1 ? "" : "s",
                 (double)(slots_now_ms() - rc->down_since_ms) / 1000.0);
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

/* Arm the request's deadline one command timeout from now.  libevent
 * counts a timer from the time it cached when the loop last woke, which in
 * a worker is before the handlers it just ran (inside one callback): a
 * request sent after a 10 s job would be late on arrival.  Under
 * "replicated" any request may queue behind a WAIT. */
static int arm_deadline(struct request *req)
{
    struct rconn *rc = req->rc;
    int ms = rc->opt.command_timeout_ms + (rc->replicated ? rc->repl.timeout_ms : 0);
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    event_base_update_cache_time(rc->base);
    req->due_ms = slots_now_ms() + ms;
    return evtimer_add(req->deadline, &tv);
}

/* The deadline passed.  Late by more than DEADLINE_SLACK_MS, the loop was
 * busy (a worker runs its handlers inside one callback): the request may
 * not even have left (writes wait for the loop), or its reply been handed
 * over (reads are deferred to the loop's next turn).  That time is not the
 * server's: it gets a whole command timeout again, counted from now. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct request *req = arg;
    struct rconn *rc = req->rc;
    if (slots_now_ms() - req->due_ms > DEADLINE_SLACK_MS && arm_deadline(req) == 0)
        return;
    if (rc->io == req->io && rc->io)
        drop(rc, "no reply within the command timeout");
}

static void on_reply(struct rconn_io *io, redisReply *reply, void *privdata);

static int request_write(struct request *req)
{
    struct rconn *rc = req->rc;
    req->io = rc->io;
    if (rc->opt.command_timeout_ms > 0 && arm_deadline(req) < 0)
        return -1;
    return rconn_io_send(rc->io, req->formatted, (size_t)req->len, on_reply, req, 0);
}

static void send_script_load(struct rconn *rc, int script);

/* A cluster's answer that the routing connection acts on (MOVED, ASK,
 * TRYAGAIN, CLUSTERDOWN: see cluster_policy.h): not an error of the
 * command. */
static int is_redirection(const redisReply *reply)
{
    enum cluster_error_kind kind = cluster_error_kind(reply->str);
    return kind != CLUSTER_ERR_NONE && kind != CLUSTER_ERR_DEMOTED;
}

static void on_reply(struct rconn_io *io, redisReply *reply, void *privdata)
{
    (void)io;
    struct request *req = privdata;
    struct rconn *rc = req->rc;
    evtimer_del(req->deadline);
    /* The script vanished (SCRIPT FLUSH): load it and send once more; the
     * script did not run, so this is safe. */
    if (redis_conn_is_noscript(reply) && !req->resent && req->script >= 0 && rc->io == req->io
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
    if (redis_conn_is_failover(reply) && rc->io) {
        rc->demoted = 1;
        drop_soon(rc, reply->str);
        reply = NULL;
    } else if (reply && rc->demoted) {
        note_recovery(rc);
    }
    if (reply && reply->type == REDIS_REPLY_ERROR
        && !(rc->cluster_node && is_redirection(reply)))
        log_warn("redis error (%s connection): %s", rc->name, reply->str);
    req->fn(rc, reply, req->arg);
    request_free(req);
}

const char *rconn_last_failure(const struct rconn *rc)
{
    if (rc->cluster)
        return rcluster_last_failure(rc->cluster);
    return rc->last_failure[0] ? rc->last_failure : "connection to Redis lost";
}

/* rconn_send without WAIT. */
static int send_request(struct rconn *rc, const struct cmd *cmd, int script,
                        rconn_reply_fn fn, void *arg)
{
    if (!rc->up || rc->dropping || !rc->io || cmd->oom)
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
    if (rc->cluster)
        return rcluster_send(rc->cluster, cmd, script, fn, arg);
    if (rc->replicated && redis_conn_script_writes(script))
        return rconn_wait_send(rc, &rc->repl, cmd, script, fn, arg);
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
static void on_handshake_reply(struct rconn_io *io, redisReply *reply, void *privdata)
{
    struct rconn *rc = privdata;
    if (rc->io != io || !reply)
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

static void on_message(struct rconn_io *io, redisReply *reply, void *privdata)
{
    struct rconn *rc = privdata;
    if (rc->io != io || !reply || reply->type != REDIS_REPLY_ARRAY || reply->elements < 3)
        return;
    const redisReply *kind = reply->element[0];
    if (kind->type == REDIS_REPLY_STRING && strcmp(kind->str, "subscribe") == 0) {
        if (--rc->pending == 0)
            handshake_done(rc);
        return;
    }
    const redisReply *channel = reply->element[1], *payload = reply->element[2];
    if (kind->type == REDIS_REPLY_STRING && strcmp(kind->str, "message") == 0
        && channel->type == REDIS_REPLY_STRING && payload->type == REDIS_REPLY_STRING
        && rc->on_message)
        rc->on_message(rc, channel->str, payload->str, payload->len, rc->message_arg);
}

static void send_script_load(struct rconn *rc, int script)
{
    const char *argv[3] = { "SCRIPT", "LOAD", dq_scripts[script].text };
    (void)rconn_io_command(rc->io, NULL, NULL, 0, 3, argv, NULL);
}

/* Queue a handshake command; a failure to queue fails the attempt. */
static void handshake_command(struct rconn *rc, rconn_io_reply_fn fn, int persistent,
                              int argc, const char **argv)
{
    rc->pending++;
    if (rconn_io_command(rc->io, fn, rc, persistent, argc, argv, NULL) < 0)
        drop_soon(rc, "out of memory sending the handshake");
}

/* One SUBSCRIBE for every channel; each is confirmed by a reply of its
 * own (on_message), all of which the handshake waits for. */
static void subscribe_all(struct rconn *rc)
{
    const char **argv = rconn_channels_argv(&rc->channels);
    if (!argv) {
        drop_soon(rc, "out of memory sending the handshake");
        return;
    }
    rc->pending += (int)rc->channels.n - 1;
    handshake_command(rc, on_message, 1, (int)rc->channels.n + 1, argv);
    free(argv);
}

static void start_handshake(struct rconn *rc)
{
    rc->pending = 0;
    const char *auth[3];
    int argc = redis_conn_auth_argv(&rc->opt, auth);
    if (argc)
        handshake_command(rc, on_handshake_reply, 0, argc, auth);
    if (rc->opt.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", rc->opt.db);
        const char *sel[2] = { "SELECT", db };
        handshake_command(rc, on_handshake_reply, 0, 2, sel);
    }
    if (rc->channels.n) {
        subscribe_all(rc);
        return;
    }
    for (int s = 0; s < DQ_SCRIPT_COUNT; s++) {
        const char *load[3] = { "SCRIPT", "LOAD", dq_scripts[s].text };
        handshake_command(rc, on_handshake_reply, 0, 3, load);
    }
}

static void on_connect(struct rconn_io *io, int ok, const char *why, void *arg)
{
    struct rconn *rc = arg;
    if (rc->io != io)
        return;
    if (!ok) {
        /* rconn_io frees the connection after this callback. */
        rc->io = NULL;
        evtimer_del(rc->connect_timer);
        note_failure(rc, why);
        schedule_reconnect(rc);
        return;
    }
    if (!rc->opt.unix_path && rc->opt.keepalive)
        rconn_io_keepalive(io);
    start_handshake(rc);
}

static void on_disconnect(struct rconn_io *io, const char *why, void *arg)
{
    struct rconn *rc = arg;
    if (rc->io != io)
        return;         /* we dropped it ourselves */
    int was_up = rc->up;
    rc->io = NULL;      /* rconn_io frees the connection after this callback */
    rc->up = 0;
    evtimer_del(rc->connect_timer);
    note_failure(rc, why && *why ? why : "connection closed");
    if (was_up && rc->ev.on_down)
        rc->ev.on_down(rc, rc->ev.arg);
    schedule_reconnect(rc);
}

/*
 * Behind Sentinel: ask the sentinels where the master is before each
 * attempt (sentinel.h), so that every reconnect, and so every failover
 * reply, follows a moved master.  This blocks the loop, but only while the
 * connection is down and for at most SENTINEL_TIMEOUT_MS per sentinel
 * listed plus one ROLE check; a sentinel or master that is down refuses
 * at once on a LAN.  -1 (the failure noted, the next attempt planned)
 * when no master is known.
 */
static int locate_master(struct rconn *rc)
{
    char was[300], why[320];
    redis_conn_describe(&rc->opt, was, sizeof was);
    int changed = sentinel_locate(rc->sentinel, &rc->opt, why, sizeof why);
    if (changed < 0) {
        note_failure(rc, why);
        schedule_reconnect(rc);
        return -1;
    }
    rc->located = 1;
    if (changed && rc->was_ever_up)
        log_info("redis (%s connection): the sentinels moved the master from %s to %s:%d",
                 rc->name, was, rc->opt.host, rc->opt.port);
    return 0;
}

static void connect_now(struct rconn *rc)
{
    rc->dropping = 0;   /* a drop_soon the server beat to it is moot */
    if (rc->sentinel && locate_master(rc) < 0)
        return;
    const struct rconn_io_events ev = { on_connect, on_disconnect, rc };
    char err[sizeof rc->last_failure];
    struct rconn_io *io = rconn_io_connect(rc->base, &rc->opt, &ev, err, sizeof err);
    if (!io) {
        note_failure(rc, err);
        schedule_reconnect(rc);
        return;
    }
    rc->io = io;
    struct timeval tv = { rc->opt.connect_timeout_ms / 1000,
                          (rc->opt.connect_timeout_ms % 1000) * 1000 };
    if (evtimer_add(rc->connect_timer, &tv) < 0)  /* the system's timeout then applies */
        log_err("redis (%s connection): cannot arm the connect timeout", rc->name);
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
    if (rc->io && rc->dropping)
        drop(rc, NULL);
    else if (rc->io)
        drop(rc, rconn_io_silent_tls(rc->io)
                 ? "TLS: the server does not speak TLS on this port (no answer to the "
                   "TLS hello within the connect timeout)"
                 : "connect or handshake timed out");
}

/* Next attempt after the backoff, with +-25% jitter so that many workers
 * do not reconnect in step after a Redis restart. */
static void schedule_reconnect(struct rconn *rc)
{
    int ms = redis_conn_backoff_next(&rc->backoff_ms, (unsigned long)random());
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    if (evtimer_add(rc->retry_timer, &tv) < 0)
        log_err("redis (%s connection): no reconnect timer: it stays down", rc->name);
}

/*
 * SIGUSR2 (the supervisor relays it when a sentinel announces
 * +switch-master): look the master up at once rather than at the end of
 * the backoff.  A connection up on the old address is dropped and made
 * again; one waiting for its next attempt makes it now; one connecting is
 * left to finish (its handshake or first command will tell).
 */
static void on_switch_signal(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct rconn *rc = arg;
    if (rc->dropping || (rc->io && !rc->up))
        return;
    if (!rc->io && !evtimer_pending(rc->retry_timer, NULL))
        return;         /* not started */
    if (rc->up) {
        char was[300], why[400];
        redis_conn_describe(&rc->opt, was, sizeof was);
        int changed = sentinel_resolve(rc->sentinel, &rc->opt, why, sizeof why);
        if (changed <= 0)
            return;     /* still the master, or nobody knows better */
        snprintf(why, sizeof why, "the sentinels moved the master away from %s", was);
        drop(rc, why);
    }
    evtimer_del(rc->retry_timer);
    rc->backoff_ms = REDIS_CONN_BACKOFF_MIN_MS;
    connect_now(rc);
}

/* Behind Sentinel: the sentinels' list, and the signal that says the
 * master moved.  -1 after logging. */
static int rconn_sentinel_setup(struct rconn *rc, const dq_options *opt)
{
    char err[320];
    if (!(rc->sentinel = sentinel_new(opt, err, sizeof err))) {
        log_err("redis connection %s: %s", rc->name, err);
        return -1;
    }
    rc->switch_ev = evsignal_new(rc->base, SIGUSR2, on_switch_signal, rc);
    if (!rc->switch_ev || event_add(rc->switch_ev, NULL) < 0) {
        log_err("redis connection %s: cannot watch SIGUSR2", rc->name);
        return -1;
    }
    return 0;
}

/* One master's connection for the cluster module: an ordinary rconn. */
static struct rconn *cluster_node_new(struct event_base *base, const dq_options *opt,
                                      const char *name, const struct rconn_events *ev)
{
    struct rconn *rc = rconn_new(base, opt, name, ev);
    if (rc)
        rc->cluster_node = 1;
    return rc;
}

static const struct rcluster_node_ops cluster_node_ops = {
    cluster_node_new, rconn_start, rconn_is_up, rconn_send, rconn_subscribe_many,
    rconn_count_reconnects, rconn_close_in_child, rconn_last_failure, rconn_free,
};

/* Cluster mode: an rconn that only holds the routing part. */
static struct rconn *cluster_new(struct event_base *base, const dq_options *opt,
                                 const char *name, const struct rconn_events *ev)
{
    struct rconn *rc = calloc(1, sizeof *rc);
    if (!rc)
        return NULL;
    rc->base = base;
    if (!(rc->name = strdup(name))
        || !(rc->cluster = rcluster_new(base, opt, name, rc, ev, &cluster_node_ops))) {
        free(rc->name);
        free(rc);
        return NULL;
    }
    return rc;
}

struct rconn *rconn_new(struct event_base *base, const dq_options *opt,
                        const char *name, const struct rconn_events *ev)
{
    if (opt->cluster)
        return cluster_new(base, opt, name, ev);
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
    rc->repl.timeout_ms = opt->replication_timeout_ms > 0 ? opt->replication_timeout_ms
                                                          : DQ_DEFAULT_REPLICATION_TIMEOUT_MS;
    rc->repl.name = rc->name;
    rc->repl.opt = &rc->opt;
    rc->repl.send = send_request;
    if (ev)
        rc->ev = *ev;
    rc->connect_timer = evtimer_new(base, on_connect_timer, rc);
    rc->retry_timer = evtimer_new(base, on_retry_timer, rc);
    if (!rc->name || !rc->connect_timer || !rc->retry_timer
        || (opt->sentinel.master && rconn_sentinel_setup(rc, opt) < 0)) {
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
    if (rc->cluster)
        rcluster_start(rc->cluster);
    else if (!rc->io)
        connect_now(rc);
}

int rconn_is_up(const struct rconn *rc)
{
    if (rc->cluster)
        return rcluster_is_up(rc->cluster);
    return rc->up && !rc->dropping;
}

void rconn_isolate_masters(struct rconn *rc)
{
    if (rc->cluster)
        rcluster_isolate_masters(rc->cluster);
}

int rconn_key_is_up(const struct rconn *rc, const char *key)
{
    if (rc->cluster)
        return rcluster_key_is_up(rc->cluster, key, strlen(key));
    return rconn_is_up(rc);
}

int rconn_subscribe_many(struct rconn *rc, const char *const *channels, size_t n,
                         rconn_message_fn fn, void *arg)
{
    if (rc->cluster)
        return rcluster_subscribe(rc->cluster, channels, n, fn, arg);
    if (rconn_channels_set(&rc->channels, channels, n) < 0)
        return -1;
    rc->on_message = fn;
    rc->message_arg = arg;
    return 0;
}

void rconn_subscribe(struct rconn *rc, const char *channel, rconn_message_fn fn,
                     void *arg)
{
    if (rconn_subscribe_many(rc, &channel, 1, fn, arg) < 0)
        rc->on_message = NULL;  /* out of memory: subscribed to nothing */
}

void rconn_count_reconnects(struct rconn *rc, uint64_t *counter)
{
    if (rc->cluster)
        rcluster_count_reconnects(rc->cluster, counter);
    rc->reconnects = counter;
}

void rconn_free(struct rconn *rc)
{
    if (!rc)
        return;
    if (rc->cluster) {
        rcluster_free(rc->cluster);
        free(rc->name);
        free(rc);
        return;
    }
    struct rconn_io *io = rc->io;
    rc->io = NULL;
    rc->up = 0;
    rc->ev.on_down = NULL;
    if (io)
        rconn_io_free(io);
    if (rc->connect_timer)
        event_free(rc->connect_timer);
    if (rc->retry_timer)
        event_free(rc->retry_timer);
    if (rc->switch_ev)
        event_free(rc->switch_ev);
    sentinel_free(rc->sentinel);
    free(rc->name);
    redis_conn_opts_free(&rc->opt);
    rconn_channels_free(&rc->channels);
    free(rc);
}

void rconn_close_in_child(struct rconn *rc)
{
    if (rc && rc->cluster)
        rcluster_close_in_child(rc->cluster);
    else if (rc && rc->io && rconn_io_fd(rc->io) >= 0)
        close(rconn_io_fd(rc->io));
}
