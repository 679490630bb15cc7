/*
 * ui_data: the dashboard's questions to Redis (ui_data.h says the
 * contract).  Each call is an operation (struct ui_op) made of one or
 * more requests (struct ui_sub), one per partition it reaches; the
 * operation ends, and its callback runs, when its last request has
 * answered.  rconn answers every request it took exactly once (with NULL
 * when the connection is lost or freed), so every operation ends, also
 * inside ui_data_free.
 * The pages of a queue's lists are ui_data_page.c's (struct ui_op_hooks).
 */
#include "daemon/admin/ui_data.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis/rconn.h"
#include "daemon/admin/ui_data_op.h"
#include "lib/proto.h"
#include "lib/sched.h"

#define UI_DEAD_BATCH 500       /* dead jobs per requeue/purge call, as the CLI's */
#define UI_SCHEDULES_MAX 10000  /* as sched_list.lua allows */

static void on_reply(struct rconn *rc, redisReply *reply, void *arg);

/* ---- operations ---------------------------------------------------------- */

void ui_data_op_fail(struct ui_op *op, dq_status st, const char *fmt, ...)
{
    if (op->st != DQ_OK)
        return;
    op->st = st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(op->err, sizeof op->err, fmt, ap);
    va_end(ap);
}

int ui_data_call_refused(struct ui_data *d)
{
    if (d)
        snprintf(d->refused, sizeof d->refused, "%s",
                 d->freeing ? "the dashboard's connection is closing (a reload)"
                            : "a request the dashboard cannot make");
    return -1;
}

struct ui_op *ui_data_op_new(struct ui_data *d, enum op_kind kind,
                             const struct queue_conf *q, void *arg)
{
    struct ui_op *op = calloc(1, sizeof *op);
    /* Every call starts here: a refusal it meets is its own. */
    snprintf(d->refused, sizeof d->refused, "%s", op ? "" : "out of memory");
    if (!op)
        return NULL;
    op->d = d;
    op->kind = kind;
    op->q = q;
    op->nparts = q->partitions > 1 ? (unsigned)q->partitions : 1;
    op->arg = arg;
    return op;
}

void ui_data_op_free(struct ui_op *op)
{
    if (op->hooks)
        op->hooks->free(op);
    free(op->id);
    dq_job_info_free(&op->info);
    dq_schedule_list_free(&op->list);
    free(op);
}

/* The operation is over: its callback, once, then free it. */
static void op_finish(struct ui_op *op)
{
    const char *err = op->st == DQ_OK ? NULL : op->err;
    switch (op->kind) {
    case OP_PAGE:
        if (op->st == DQ_OK)
            op->hooks->seal(op);
        op->fn.page(op->st == DQ_OK ? &op->page : NULL, err, op->arg);
        break;
    case OP_SHOW:
        op->fn.show(op->st == DQ_OK ? &op->info : NULL, op->st, err, op->arg);
        break;
    case OP_SCHEDULES:
        op->fn.schedules(op->st == DQ_OK ? &op->list : NULL, err, op->arg);
        break;
    case OP_ACTION:
        op->fn.action(op->st, op->done, err, op->arg);
        break;
    }
    ui_data_op_free(op);
}

/* ---- building and sending requests ---------------------------------------- */

static const char *prefix_of(const struct ui_data *d)
{
    return d->dc->redis.prefix;
}

static enum dq_script_id action_cmd(struct ui_op *op, struct cmd *c,
                                    const struct queue_keys *k)
{
    switch (op->act) {
    case UI_ACT_REQUEUE:
    case UI_ACT_REQUEUE_ALL:
        proto_dead_cmd(c, k, DQ_SCRIPT_REQUEUE, op->id, UI_DEAD_BATCH);
        return DQ_SCRIPT_REQUEUE;
    case UI_ACT_PURGE:
    case UI_ACT_PURGE_ALL:
        proto_dead_cmd(c, k, DQ_SCRIPT_PURGE, op->id, UI_DEAD_BATCH);
        return DQ_SCRIPT_PURGE;
    case UI_ACT_CANCEL:
        proto_cancel_cmd(c, k, op->id);
        return DQ_SCRIPT_CANCEL;
    case UI_ACT_RUN_NOW:
        proto_run_now_cmd(c, k, op->id);
        return DQ_SCRIPT_RUN_NOW;
    case UI_ACT_PAUSE:
        proto_pause_cmd(c, k, DQ_SCRIPT_PAUSE);
        return DQ_SCRIPT_PAUSE;
    case UI_ACT_RESUME:
        break;
    }
    proto_pause_cmd(c, k, DQ_SCRIPT_RESUME);
    return DQ_SCRIPT_RESUME;
}

/* Whether partition `part` (keys k) can be asked now: its master is up
 * (over a cluster; on one server, the connection); if not, the operation
 * is marked failed naming it. */
static int part_reachable(struct ui_op *op, unsigned part, const struct queue_keys *k)
{
    if (rconn_key_is_up(op->d->conn, k->key[0]))
        return 1;
    if (op->nparts > 1 && rconn_is_up(op->d->conn))
        ui_data_op_fail(op, DQ_ERR_CONNECT, "partition %u of queue %s is out of reach: %s",
                        part, op->q->name, rconn_last_failure(op->d->conn));
    else
        ui_data_op_fail(op, DQ_ERR_CONNECT, "Redis is out of reach: %s",
                        rconn_last_failure(op->d->conn));
    return 0;
}

/* Send request `s` of its operation.  0 when sent (on_reply then runs
 * once), -1 when not (s is the caller's still), the operation then marked
 * failed with why: the dashboard closing, the partition's master out of
 * reach (a cluster master down: the other partitions' requests go on),
 * not connected, out of memory. */
int ui_data_sub_send(struct ui_sub *s)
{
    struct ui_op *op = s->op;
    if (op->d->freeing) {
        ui_data_op_fail(op, DQ_ERR_CONNECT, "cannot send to Redis: the dashboard is closing");
        return -1;
    }
    struct queue_keys k;
    struct sched_keys sk;
    keys_build_part(&k, prefix_of(op->d), op->q->name, s->part, op->nparts);
    if (!part_reachable(op, s->part, &k))
        return -1;
    struct cmd c;
    cmd_init(&c);
    enum dq_script_id script;
    switch (op->kind) {
    case OP_PAGE:
        script = op->hooks->cmd(op, s, &c, &k);
        break;
    case OP_SHOW:
        proto_show_cmd(&c, &k, op->id, false);
        script = DQ_SCRIPT_SHOW;
        break;
    case OP_SCHEDULES:
        keys_build_sched_part(&sk, prefix_of(op->d), op->q->name, op->nparts);
        sched_list_cmd(&c, &k, &sk, -1, UI_SCHEDULES_MAX, NULL);
        script = DQ_SCRIPT_SCHED_LIST;
        break;
    default:
        script = action_cmd(op, &c, &k);
        break;
    }
    int rc = c.oom ? -1 : rconn_send(op->d->conn, &c, (int)script, on_reply, s);
    if (rc == 0)
        op->outstanding++;
    else
        ui_data_op_fail(op, c.oom ? DQ_ERR_NOMEM : DQ_ERR_CONNECT, "cannot send to Redis: %s",
                        c.oom ? "out of memory" : "not connected");
    cmd_free(&c);
    return rc;
}

struct ui_sub *ui_data_sub_new(struct ui_op *op, unsigned part)
{
    struct ui_sub *s = calloc(1, sizeof *s);
    if (s) {
        s->op = op;
        s->part = part;
    }
    return s;
}

void ui_data_sub_free(struct ui_sub *s)
{
    free(s->ids);
    free(s);
}

/* Send a request to partition `part`: 0 when sent, else -1 with the
 * operation marked failed. */
static int send_to(struct ui_op *op, unsigned part)
{
    struct ui_sub *s = ui_data_sub_new(op, part);
    if (s && ui_data_sub_send(s) == 0)
        return 0;
    if (!s)
        ui_data_op_fail(op, DQ_ERR_NOMEM, "cannot send to Redis: out of memory");
    free(s);
    return -1;
}

/* An operation none of whose requests went: keep why (ui_data_refusal),
 * free it; -1. */
static int refuse(struct ui_op *op)
{
    snprintf(op->d->refused, sizeof op->d->refused, "%s", op->err);
    ui_data_op_free(op);
    return -1;
}

/*
 * Start an operation: a request to each partition in parts[0..n-1].  0
 * when at least one went (the operation then ends by its replies), -1
 * when none did: the operation is freed and its callback never runs.
 */
static int op_start(struct ui_op *op, const unsigned *parts, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (send_to(op, parts[i]) != 0)
            break;
    if (op->outstanding > 0)
        return 0;
    return refuse(op);
}

/* Start op on every partition of its queue: only when every partition's
 * master is up, so that an action on the whole queue (pause, requeue
 * all) is not done on some partitions and refused on others. */
int ui_data_op_start_all(struct ui_op *op)
{
    unsigned *parts = malloc(op->nparts * sizeof *parts);
    if (!parts) {
        ui_data_op_fail(op, DQ_ERR_NOMEM, "out of memory");
        return refuse(op);
    }
    for (unsigned p = 0; p < op->nparts; p++) {
        struct queue_keys k;
        keys_build_part(&k, prefix_of(op->d), op->q->name, p, op->nparts);
        if (!part_reachable(op, p, &k)) {
            free(parts);
            return refuse(op);
        }
        parts[p] = p;
    }
    int rc = op_start(op, parts, op->nparts);
    free(parts);
    return rc;
}

/* ---- replies ---------------------------------------------------------------- */

/* Whether a reply can be read; if not the operation is marked failed. */
static int reply_usable(struct ui_op *op, const redisReply *r)
{
    if (!r) {
        /* An action sent and not answered may have run. */
        ui_data_op_fail(op, op->kind == OP_ACTION ? DQ_ERR_TIMEOUT : DQ_ERR_CONNECT,
                        "no answer from Redis: %s",
                        op->d->freeing ? "the dashboard's connection is closing (a reload)"
                                       : rconn_last_failure(op->d->conn));
        return 0;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        ui_data_op_fail(op, DQ_ERR_REDIS, "%s", r->str);
        return 0;
    }
    return 1;
}

void ui_data_op_bad_reply(struct ui_op *op, const char *script)
{
    ui_data_op_fail(op, DQ_ERR_REDIS, "unexpected reply from the %s script", script);
}

static void show_reply(struct ui_op *op, const redisReply *r)
{
    dq_status st = proto_show_reply(r, &op->info, NULL);
    if (st == DQ_OK && !(op->info.job.id = strdup(op->id)))
        st = DQ_ERR_NOMEM;
    if (st == DQ_ERR_NOTFOUND)
        ui_data_op_fail(op, st, "no job %s in queue %s", op->id, op->q->name);
    else if (st == DQ_ERR_NOMEM)
        ui_data_op_fail(op, st, "out of memory");
    else if (st != DQ_OK)
        ui_data_op_bad_reply(op, "show");
}

static void schedules_reply(struct ui_op *op, const redisReply *r)
{
    if (sched_list_reply(r, &op->list) != DQ_OK)
        ui_data_op_bad_reply(op, "sched_list");
}

/* A one-job action's answer from cancel or run_now. */
static void one_job_outcome(struct ui_op *op, dq_status st)
{
    const char *what = op->act == UI_ACT_CANCEL ? "cancel" : "run_now";
    switch (st) {
    case DQ_OK:
        op->done = 1;
        break;
    case DQ_ERR_NOTFOUND:
        ui_data_op_fail(op, st, "no job %s in queue %s", op->id, op->q->name);
        break;
    case DQ_ERR_RUNNING:
        ui_data_op_fail(op, st, "job %s in queue %s is running", op->id, op->q->name);
        break;
    case DQ_ERR_DEAD:
        ui_data_op_fail(op, st, "job %s in queue %s is dead", op->id, op->q->name);
        break;
    default:
        ui_data_op_bad_reply(op, what);
    }
}

/* An action's answer; 1 when the same request must go again (a requeue
 * or purge of all whose batch left more). */
static int action_reply(struct ui_op *op, const redisReply *r)
{
    int64_t moved, remaining, now, since;
    switch (op->act) {
    case UI_ACT_CANCEL:
        one_job_outcome(op, proto_cancel_reply(r));
        return 0;
    case UI_ACT_RUN_NOW:
        one_job_outcome(op, proto_run_now_reply(r));
        return 0;
    case UI_ACT_PAUSE:
    case UI_ACT_RESUME:
        if (proto_pause_reply(r, &now, &since) != DQ_OK)
            ui_data_op_bad_reply(op, op->act == UI_ACT_PAUSE ? "pause" : "resume");
        op->done = 1;
        return 0;
    default:
        break;
    }
    int requeue = op->act == UI_ACT_REQUEUE || op->act == UI_ACT_REQUEUE_ALL;
    if (proto_count_reply(r, &moved, &remaining) != DQ_OK) {
        ui_data_op_bad_reply(op, requeue ? "requeue" : "purge");
        return 0;
    }
    op->done += moved;
    if (op->id) {
        if (moved == 0)
            ui_data_op_fail(op, DQ_ERR_NOTFOUND, "no dead job %s in queue %s", op->id,
                            op->q->name);
        return 0;
    }
    /* As the CLI: on until none is left, or a batch moved nothing
     * (records that cannot be requeued stay dead). */
    return op->st == DQ_OK && remaining > 0 && moved > 0;
}

/* What follows once the last request of a step has answered. */
static void op_step_done(struct ui_op *op)
{
    if (op->kind == OP_PAGE && op->hooks->next_step(op))
        return;
    op_finish(op);
}

static void on_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct ui_sub *s = arg;
    struct ui_op *op = s->op;
    op->outstanding--;
    int again = 0;
    if (op->st == DQ_OK && reply_usable(op, reply)) {
        switch (op->kind) {
        case OP_PAGE:
            op->hooks->reply(op, s, reply);
            break;
        case OP_SHOW:
            show_reply(op, reply);
            break;
        case OP_SCHEDULES:
            schedules_reply(op, reply);
            break;
        case OP_ACTION:
            again = action_reply(op, reply);
            break;
        }
    }
    if (again && ui_data_sub_send(s) != 0)
        again = 0;
    if (!again)
        ui_data_sub_free(s);
    if (op->outstanding == 0)
        op_step_done(op);
}

/* ---- the calls ------------------------------------------------------------ */

struct ui_data *ui_data_new(struct event_base *base, const struct daemon_conf *dc)
{
    struct ui_data *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->dc = dc;
    struct rconn_events ev = { NULL, NULL, d, NULL };
    if (!(d->conn = rconn_from_conf(base, &dc->redis, "ui", &ev))) {
        free(d);
        return NULL;
    }
    rconn_isolate_masters(d->conn);     /* a master down: the others' jobs */
    rconn_start(d->conn);
    return d;
}

void ui_data_free(struct ui_data *d)
{
    if (!d)
        return;
    d->freeing = 1;
    rconn_free(d->conn);        /* every pending request answers NULL: each op ends */
    free(d);
}

int ui_data_is_up(const struct ui_data *d)
{
    return d && !d->freeing && rconn_is_up(d->conn);
}

const char *ui_data_refusal(const struct ui_data *d)
{
    return d && d->refused[0] ? d->refused : "Redis is not connected";
}

/* An operation on the one partition that holds job `id`. */
static int op_start_on_job(struct ui_op *op, const char *id)
{
    if (!(op->id = strdup(id))) {
        ui_data_op_free(op);
        return -1;
    }
    unsigned part = keys_partition_of(id, op->nparts);
    return op_start(op, &part, 1);
}

int ui_data_show(struct ui_data *d, const struct queue_conf *q, const char *id,
                 ui_show_fn fn, void *arg)
{
    if (!d || d->freeing || !id || !*id)
        return ui_data_call_refused(d);
    struct ui_op *op = ui_data_op_new(d, OP_SHOW, q, arg);
    if (!op)
        return -1;
    op->fn.show = fn;
    return op_start_on_job(op, id);
}

int ui_data_schedules(struct ui_data *d, const struct queue_conf *q,
                      ui_schedules_fn fn, void *arg)
{
    if (!d || d->freeing)
        return ui_data_call_refused(d);
    struct ui_op *op = ui_data_op_new(d, OP_SCHEDULES, q, arg);
    if (!op)
        return -1;
    op->fn.schedules = fn;
    unsigned part = 0;          /* a partitioned queue's schedules live in 0 */
    return op_start(op, &part, 1);
}

static int one_job_action(enum ui_action a)
{
    return a == UI_ACT_REQUEUE || a == UI_ACT_PURGE || a == UI_ACT_CANCEL
           || a == UI_ACT_RUN_NOW;
}

int ui_data_action(struct ui_data *d, const struct queue_conf *q, enum ui_action a,
                   const char *id, ui_action_fn fn, void *arg)
{
    if (!d || d->freeing || (one_job_action(a) && (!id || !*id)))
        return ui_data_call_refused(d);
    struct ui_op *op = ui_data_op_new(d, OP_ACTION, q, arg);
    if (!op)
        return -1;
    op->fn.action = fn;
    op->act = a;
    if (one_job_action(a))
        return op_start_on_job(op, id);
    return ui_data_op_start_all(op);
}
