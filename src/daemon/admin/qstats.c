#include "daemon/admin/qstats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/dconfig_parts.h"
#include "redis/rconn.h"
#include "daemon/slots.h"
#include "lib/proto.h"

#define CONNECT_TIMEOUT_MS 1000

/* The argument of one partition's request: which entry its reply fills,
 * and which queue that partition is of. */
struct qstats_req {
    struct qstats *q;
    size_t i;
    size_t queue;
};

struct qstats {
    const struct daemon_conf *dc;
    struct rconn *conn;
    struct event *timer;
    size_t nparts;              /* partitions over all queues */
    struct queue_keys *keys;    /* one per partition */
    struct qstats_req *reqs;    /* one per partition */
    dq_stats *parts;            /* the round in flight's, per partition */
    int64_t *parts_paused;
    int64_t *parts_oldest;      /* the round in flight's oldest due, per partition */
    dq_stats *parts_cur;        /* the last complete set's, per partition */
    int64_t *parts_paused_cur;  /* ... and the same of the other two */
    int64_t *parts_oldest_cur;
    unsigned char *parts_state; /* the round in flight's: enum part_state */
    unsigned char *parts_state_cur;
    char why_reach[160];        /* the round in flight's: why a partition was
                                   out of reach (the last one's) */
    char why_fail[160];         /* ... and why one's statistics failed */
    char why_reach_cur[160];    /* the last set's */
    char why_fail_cur[160];
    size_t out_of_reach;        /* the last set's partitions of each state */
    size_t failing;
    size_t answered;            /* partitions that answered in the round in flight */
    dq_stats *cur;              /* the last complete set */
    dq_stats *next;             /* the round in flight fills it */
    int64_t *paused_cur;        /* cur's and next's paused_since, per queue */
    int64_t *paused_next;
    int64_t *oldest_cur;        /* cur's and next's oldest due, per queue */
    int64_t *oldest_next;
    int have_cur;
    int64_t cur_asked_ms;       /* when cur's round was sent */
    size_t awaiting;            /* replies of the round in flight */
    int64_t asked_ms;           /* when the round in flight was sent */
    int last_failed;            /* the last round ended without a full set */
    char err[160];              /* why it failed */
    int freeing;
};

/* Add partition figures `p` into the queue's `sum`. */
static void add_partition(dq_stats *sum, const dq_stats *p, int first)
{
    if (first) {
        *sum = *p;
        return;
    }
    proto_stats_add(sum, p);
}

/* A queue's figures are its partitions' summed; its pause state is
 * partition 0's (pause writes every partition's); its oldest due job the
 * oldest of any partition's. */
static void sum_partitions(struct qstats *q)
{
    for (size_t i = 0; i < q->nparts; i++) {
        size_t qi = q->reqs[i].queue;
        int first = i == 0 || q->reqs[i - 1].queue != qi;
        add_partition(&q->next[qi], &q->parts[i], first);
        int64_t oldest = q->parts_oldest[i];
        if (first) {
            q->paused_next[qi] = q->parts_paused[i];
            q->oldest_next[qi] = oldest;
        } else if (oldest >= 0 && (q->oldest_next[qi] < 0 || oldest < q->oldest_next[qi])) {
            q->oldest_next[qi] = oldest;
        }
    }
}

/*
 * The round is over.  It failed when no partition answered.  Over a
 * cluster with one master down, the partitions on the others still count:
 * those out of reach keep their last figures, and are named as out of
 * reach (qstats_view).
 */
static void round_done(struct qstats *q)
{
    if (q->answered == 0) {
        q->last_failed = 1;
        return;
    }
    q->out_of_reach = q->failing = 0;
    for (size_t i = 0; i < q->nparts; i++) {
        q->out_of_reach += q->parts_state[i] == PART_OUT_OF_REACH;
        q->failing += q->parts_state[i] == PART_FAILING;
        if (q->parts_state[i] != PART_UP) {
            q->parts[i] = q->parts_cur[i];
            q->parts_paused[i] = q->parts_paused_cur[i];
            q->parts_oldest[i] = q->parts_oldest_cur[i];
        }
    }
    sum_partitions(q);
    memcpy(q->parts_cur, q->parts, q->nparts * sizeof *q->parts);
    memcpy(q->parts_paused_cur, q->parts_paused, q->nparts * sizeof *q->parts_paused);
    memcpy(q->parts_oldest_cur, q->parts_oldest, q->nparts * sizeof *q->parts_oldest);
    memcpy(q->parts_state_cur, q->parts_state, q->nparts);
    memcpy(q->why_reach_cur, q->why_reach, sizeof q->why_reach);
    memcpy(q->why_fail_cur, q->why_fail, sizeof q->why_fail);
    dq_stats *t = q->cur;
    q->cur = q->next;
    q->next = t;
    int64_t *p = q->paused_cur;
    q->paused_cur = q->paused_next;
    q->paused_next = p;
    p = q->oldest_cur;
    q->oldest_cur = q->oldest_next;
    q->oldest_next = p;
    q->have_cur = 1;
    q->cur_asked_ms = q->asked_ms;
    q->last_failed = 0;
}

/* Partition i did not answer this round (`why`): out of reach (its
 * master down, no reply), or with an error; each kind keeps its own
 * reason, so /healthz names each partition with the right one. */
static void part_failed(struct qstats *q, size_t i, const char *why, int unreachable)
{
    q->parts_state[i] = unreachable ? PART_OUT_OF_REACH : PART_FAILING;
    if (unreachable)
        snprintf(q->why_reach, sizeof q->why_reach, "%s", why);
    else
        snprintf(q->why_fail, sizeof q->why_fail, "%s", why);
    snprintf(q->err, sizeof q->err, "%s", why);
}

static void on_stats_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct qstats_req *req = arg;
    struct qstats *q = req->q;
    if (q->freeing)
        return;
    if (!reply) {
        char why[80];
        snprintf(why, sizeof why, "no reply (connection lost, or no answer within %d ms)",
                 QSTATS_STALE_MS);
        part_failed(q, req->i, why, 1);
    } else if (reply->type == REDIS_REPLY_ERROR) {
        part_failed(q, req->i, reply->str, 0);
    } else if (proto_stats_reply(reply, &q->parts[req->i]) != DQ_OK) {
        part_failed(q, req->i, "unexpected reply from the stats script", 0);
    } else {
        q->parts_paused[req->i] = proto_stats_paused(reply);
        q->parts_oldest[req->i] = proto_stats_oldest_due(reply);
        q->parts_state[req->i] = PART_UP;
        q->answered++;
    }
    if (--q->awaiting == 0)
        round_done(q);
}

/* Ask for every queue's figures, unless the last round is still out (a
 * stalled Redis then gets one request per queue, not one per tick). */
static void refresh(struct qstats *q)
{
    if (q->awaiting > 0)
        return;
    if (!rconn_is_up(q->conn)) {
        q->last_failed = 1;
        snprintf(q->err, sizeof q->err, "not connected");
        return;
    }
    q->answered = 0;
    q->asked_ms = slots_now_ms();
    for (size_t i = 0; i < q->nparts; i++) {
        if (!rconn_key_is_up(q->conn, q->keys[i].key[0])) {
            part_failed(q, i, rconn_last_failure(q->conn), 1);
            continue;
        }
        struct cmd cmd;
        cmd_init(&cmd);
        cmd_eval(&cmd, DQ_SCRIPT_STATS, &q->keys[i]);
        if (rconn_send(q->conn, &cmd, DQ_SCRIPT_STATS, on_stats_reply, &q->reqs[i]) == 0) {
            q->awaiting++;
        } else {
            part_failed(q, i, "cannot send the stats script", 0);
        }
        cmd_free(&cmd);
    }
    if (q->awaiting == 0)
        round_done(q);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    refresh(arg);
}

static void on_up(struct rconn *rc, void *arg)
{
    (void)rc;
    refresh(arg);
}

/*
 * The admin process's Redis connection for `dc` (and the queues' key
 * names), for the statistics.
 * Unlike rconn_from_conf's, its requests time out after QSTATS_STALE_MS,
 * whatever the configured command timeout: figures that old are reported
 * as stale anyway.  The connection is then made again with rconn's backoff.
 */
static struct rconn *supervisor_conn_new(struct event_base *base,
                                         const struct daemon_conf *dc,
                                         struct queue_keys *keys,
                                         const struct rconn_events *ev)
{
    dq_options opt;
    redis_conf_to_options(&dc->redis, &opt);
    opt.connect_timeout_ms = CONNECT_TIMEOUT_MS;
    opt.command_timeout_ms = QSTATS_STALE_MS;
    struct dconfig_part it;
    for (dconfig_parts_begin(&it, dc); dconfig_parts_next(&it);)
        keys[it.at] = it.keys;
    return rconn_new(base, &opt, "stats", ev);
}

struct qstats *qstats_new(struct event_base *base, const struct daemon_conf *dc)
{
    struct qstats *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    size_t n = dc->nqueues ? dc->nqueues : 1;
    q->dc = dc;
    q->nparts = dconfig_parts_count(dc);
    size_t np = q->nparts ? q->nparts : 1;
    q->keys = calloc(np, sizeof *q->keys);
    q->reqs = calloc(np, sizeof *q->reqs);
    q->parts = calloc(np, sizeof *q->parts);
    q->parts_cur = calloc(np, sizeof *q->parts_cur);
    q->parts_paused_cur = calloc(np, sizeof *q->parts_paused_cur);
    q->parts_oldest_cur = calloc(np, sizeof *q->parts_oldest_cur);
    q->parts_state = calloc(np, 1);
    q->parts_state_cur = calloc(np, 1);
    q->parts_paused = calloc(np, sizeof *q->parts_paused);
    q->parts_oldest = calloc(np, sizeof *q->parts_oldest);
    q->cur = calloc(n, sizeof *q->cur);
    q->next = calloc(n, sizeof *q->next);
    q->paused_cur = calloc(n, sizeof *q->paused_cur);
    q->paused_next = calloc(n, sizeof *q->paused_next);
    q->oldest_cur = calloc(n, sizeof *q->oldest_cur);
    q->oldest_next = calloc(n, sizeof *q->oldest_next);
    q->timer = event_new(base, -1, EV_PERSIST, on_timer, q);
    if (!q->keys || !q->reqs || !q->parts || !q->parts_cur || !q->parts_paused || !q->cur
        || !q->next
        || !q->paused_cur || !q->paused_next || !q->parts_oldest || !q->oldest_cur
        || !q->oldest_next || !q->timer || !q->parts_paused_cur || !q->parts_oldest_cur
        || !q->parts_state || !q->parts_state_cur)
        goto fail;
    for (size_t i = 0; i < np; i++)
        q->parts_paused_cur[i] = q->parts_oldest_cur[i] = -1;   /* none known */
    struct dconfig_part it;
    for (dconfig_parts_begin(&it, dc); dconfig_parts_next(&it);)
        q->reqs[it.at] = (struct qstats_req){ q, it.at, it.queue };
    struct rconn_events ev = { on_up, NULL, q, on_up };
    if (!(q->conn = supervisor_conn_new(base, dc, q->keys, &ev)))
        goto fail;
    rconn_isolate_masters(q->conn);     /* a master down: the others' figures */
    struct timeval tv = { QSTATS_REFRESH_MS / 1000, (QSTATS_REFRESH_MS % 1000) * 1000 };
    if (event_add(q->timer, &tv) < 0)
        goto fail;
    snprintf(q->err, sizeof q->err, "not connected yet");
    q->last_failed = 1;
    rconn_start(q->conn);
    return q;
fail:
    qstats_free(q);
    return NULL;
}

void qstats_free(struct qstats *q)
{
    if (!q)
        return;
    q->freeing = 1;
    rconn_free(q->conn);        /* pending requests get NULL: ignored */
    if (q->timer)
        event_free(q->timer);
    free(q->keys);
    free(q->reqs);
    free(q->parts);
    free(q->parts_cur);
    free(q->parts_paused_cur);
    free(q->parts_oldest_cur);
    free(q->parts_state);
    free(q->parts_state_cur);
    free(q->parts_paused);
    free(q->cur);
    free(q->next);
    free(q->paused_cur);
    free(q->paused_next);
    free(q->parts_oldest);
    free(q->oldest_cur);
    free(q->oldest_next);
    free(q);
}

void qstats_read(const struct qstats *q, struct qstats_view *v)
{
    int64_t now = slots_now_ms();
    memset(v, 0, sizeof *v);
    v->stats = q->have_cur ? q->cur : NULL;
    v->parts = q->have_cur ? q->parts_cur : NULL;
    v->paused_since = q->have_cur ? q->paused_cur : NULL;
    v->oldest_due_ms = q->have_cur ? q->oldest_cur : NULL;
    v->parts_state = q->have_cur ? q->parts_state_cur : NULL;
    v->out_of_reach = q->have_cur ? q->out_of_reach : 0;
    v->failing = q->have_cur ? q->failing : 0;
    snprintf(v->why_reach, sizeof v->why_reach, "%s", v->out_of_reach ? q->why_reach_cur : "");
    snprintf(v->why_fail, sizeof v->why_fail, "%s", v->failing ? q->why_fail_cur : "");
    v->age_ms = q->have_cur ? now - q->cur_asked_ms : -1;
    v->fresh = q->have_cur && !q->last_failed && v->age_ms <= QSTATS_STALE_MS;
    if (v->fresh)
        return;
    if (q->awaiting > 0)
        snprintf(v->why, sizeof v->why, "no answer for %.1f s",
                 (double)(now - q->asked_ms) / 1000.0);
    else if (q->last_failed || !q->have_cur)
        snprintf(v->why, sizeof v->why, "%s", q->err);
    else
        snprintf(v->why, sizeof v->why, "no figures for %.1f s", (double)v->age_ms / 1000.0);
}
