#include "daemon/settler/settle.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "daemon/qparts.h"
#include "redis/rconn.h"
#include "lib/proto.h"

#define SETTLE_RETRY_MS 1000

enum cmd_state { C_WAITING, C_SENT, C_DONE };

struct settle_task;

/* One command of a settlement, kept until Redis confirms it. */
struct settle_cmd {
    struct settle_task *t;
    struct cmd cmd;
    int script;
    unsigned part;              /* the partition it acts on */
    enum cmd_state state;
    const struct slot_entry *running;   /* the fail of the running job */
};

/* The settlement of one dead worker: its commands, then recover. */
struct settle_task {
    struct settler *st;
    struct settle_task *next;
    struct qparts parts;        /* the keys of the queue's partitions */
    size_t table_end[SLOT_TABLES];  /* t->e[..table_end[0]) came from table
                                   0, then table 1's */
    unsigned table_part[SLOT_TABLES];   /* the partition of each table's */
    char queue[DQ_QUEUE_MAX + 1];
    char who[16];
    char cause[128];
    char owner[128];            /* the commands borrow these strings */
    struct slot_entry *e;       /* copies of the entries to act on */
    dq_job *jobs;               /* their ids and fences, for the builders */
    size_t n;
    struct settle_cmd *cmds;    /* the last parts.n are the recovers */
    size_t ncmds;
    int64_t give_up_ms;
    int error_logged;
    int partial_logged;         /* "settled ... on the partitions in reach" said */
    size_t acked, failed, released, recovered;
    int running_failed, running_dead;   /* the outcome, for done */
    settle_done_fn done;
    void *done_arg;
};

struct settler {
    struct rconn *conn;
    struct event *retry_timer;
    struct settle_task *tasks;
    int freeing;
};

static void pump(struct settler *st);

static void on_up(struct rconn *rc, void *arg)
{
    (void)rc;
    pump(arg);
}

static void on_retry_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pump(arg);
}

struct settler *settler_new(struct event_base *base, const struct daemon_conf *dc,
                            uint64_t *reconnects)
{
    struct settler *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    struct rconn_events ev = { on_up, NULL, st, on_up };
    st->conn = rconn_from_conf(base, &dc->redis, "settle", &ev);
    /* A cluster master down holds only the settlements of its partitions:
     * their commands wait and are sent again by the retry timer. */
    if (st->conn)
        rconn_isolate_masters(st->conn);
    if (st->conn && reconnects)
        rconn_count_reconnects(st->conn, reconnects);
    st->retry_timer = event_new(base, -1, EV_PERSIST, on_retry_timer, st);
    if (!st->conn || !st->retry_timer) {
        settler_free(st);
        return NULL;
    }
    struct timeval tv = { SETTLE_RETRY_MS / 1000, 0 };
    if (event_add(st->retry_timer, &tv) < 0) {
        settler_free(st);
        return NULL;
    }
    rconn_start(st->conn);
    return st;
}

static void task_free(struct settle_task *t)
{
    for (size_t i = 0; i < t->ncmds; i++)
        cmd_free(&t->cmds[i].cmd);
    free(t->cmds);
    free(t->jobs);
    free(t->e);
    qparts_free(&t->parts);
    free(t);
}

void settler_free(struct settler *st)
{
    if (!st)
        return;
    st->freeing = 1;
    rconn_free(st->conn);       /* pending requests get NULL: no pump */
    if (st->retry_timer)
        event_free(st->retry_timer);
    while (st->tasks) {
        struct settle_task *t = st->tasks;
        st->tasks = t->next;
        task_free(t);
    }
    free(st);
}

int settler_idle(const struct settler *st)
{
    return !st || !st->tasks;
}

/* ---- replies ------------------------------------------------------------ */

static void log_running_fail(struct settle_task *t, const struct settle_cmd *c,
                             const redisReply *reply)
{
    dq_fail_result res;
    dq_status st = proto_fail_reply(reply, &res);
    if (st == DQ_OK) {
        t->failed++;
        t->running_failed = 1;
        t->running_dead = res.dead;
        log_warn("job failed: queue=%s id=%s type=%s error=%s -> %s", t->queue,
                 c->running->id, c->running->type, t->cause, res.dead ? "dead" : "retry");
    } else if (st == DQ_ERR_STALE) {
        log_info("job %s: already settled", c->running->id);
    }
}

/* Count what a confirmed command did, for the summary line. */
static void count_reply(struct settle_task *t, const struct settle_cmd *c,
                        const redisReply *reply)
{
    if (c->running) {
        log_running_fail(t, c, reply);
    } else if (c->script == DQ_SCRIPT_ACK) {
        for (size_t i = 0; i < reply->elements; i++)
            t->acked += reply->element[i]->type == REDIS_REPLY_INTEGER
                        && reply->element[i]->integer == 1;
    } else if (c->script == DQ_SCRIPT_FAIL) {
        dq_fail_result res;
        t->failed += proto_fail_reply(reply, &res) == DQ_OK;
    } else if (reply->type == REDIS_REPLY_INTEGER) {
        if (c->script == DQ_SCRIPT_RELEASE)
            t->released += (size_t)reply->integer;
        else
            t->recovered += (size_t)reply->integer;
    }
}

static void on_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct settle_cmd *c = arg;
    struct settle_task *t = c->t;
    if (!reply || reply->type == REDIS_REPLY_ERROR) {
        /* Lost: re-sent when the connection is back.  Refused (Redis
         * read-only, out of memory): re-sent by the retry timer. */
        c->state = C_WAITING;
        if (reply && !t->error_logged) {
            t->error_logged = 1;
            log_warn("settling the jobs of %s: %s; trying again", t->who, reply->str);
        }
        return;
    }
    c->state = C_DONE;
    count_reply(t, c, reply);
    if (!t->st->freeing)
        pump(t->st);
}

/* ---- sending ------------------------------------------------------------ */

/* Send a waiting command, unless its partition's master is out of reach:
 * then it waits, as it does for a lost connection, and the retry timer and
 * the master's return try again. */
static void send_cmd(struct settler *st, struct settle_cmd *c)
{
    if (c->state == C_WAITING
        && rconn_key_is_up(st->conn, qparts_keys(&c->t->parts, c->part)->key[0])
        && rconn_send(st->conn, &c->cmd, c->script, on_reply, c) == 0)
        c->state = C_SENT;
}

/* How many partitions have a command not confirmed yet; how many of those
 * are out of reach (their master down) goes in *down, and those are named
 * in buf ("3, 7"). */
static size_t unsettled_parts(const struct settler *st, const struct settle_task *t,
                              char *buf, size_t len, size_t *down)
{
    size_t n = 0, at = 0;
    *down = 0;
    buf[0] = '\0';
    for (unsigned p = 0; p < t->parts.n; p++) {
        size_t i = 0;
        while (i < t->ncmds && (t->cmds[i].part != p || t->cmds[i].state == C_DONE))
            i++;
        if (i == t->ncmds)
            continue;
        n++;
        if (rconn_key_is_up(st->conn, qparts_keys(&t->parts, p)->key[0]))
            continue;
        if (at < len)
            at += (size_t)snprintf(buf + at, len - at, "%s%u", *down ? ", " : "", p);
        (*down)++;
    }
    return n;
}

/* Past the leases (the reaper has taken over) with nothing in flight: log,
 * tell the owner, and return 1: the task is dropped.  Checked also while
 * the connection is down, so that an outage does not keep it for ever. */
static int give_up(struct settler *st, struct settle_task *t)
{
    for (size_t i = 0; i < t->ncmds; i++)
        if (t->cmds[i].state == C_SENT)
            return 0;
    if (slots_now_ms() < t->give_up_ms)
        return 0;
    char parts[200];
    size_t down, n = unsettled_parts(st, t, parts, sizeof parts, &down);
    if (t->partial_logged && down == n)
        log_warn("%s: partition%s %s of queue %s stayed out of reach until its leases "
                 "ended; the reaper returns what it held there", t->who,
                 down == 1 ? "" : "s", parts, t->queue);
    else
        log_err("%s: its claimed jobs could not be settled in time; the reaper returns "
                "them as their leases expire", t->who);
    t->done(t->done_arg, 0, 0);
    return 1;
}

/* Everything the partitions in reach can do is done, and the rest waits
 * for masters that are down: say so once, rather than nothing until they
 * answer or the leases end. */
static void log_partial(const struct settler *st, struct settle_task *t)
{
    if (t->partial_logged)
        return;
    char parts[200];
    size_t down, n = unsettled_parts(st, t, parts, sizeof parts, &down);
    if (n == 0 || down < n)     /* a partition in reach waits on a refusal */
        return;
    t->partial_logged = 1;
    log_info("%s: settled what it held on the partitions in reach: %zu acked, %zu failed, "
             "%zu given back; partition%s %s of queue %s out of reach: settled when %s "
             "master answers, or by the reaper as the leases end", t->who, t->acked,
             t->failed, t->released, n == 1 ? "" : "s", parts, t->queue,
             n == 1 ? "its" : "their");
}

/* Whether every settling command of partition `part` is confirmed: its
 * recover may go then, not before (it would give back a job that an ack
 * of that partition is about to finish).  Partitions do not wait for each
 * other: a master down holds only its own. */
static int part_settled(const struct settle_task *t, unsigned part)
{
    for (size_t i = 0; i < t->ncmds - t->parts.n; i++)
        if (t->cmds[i].part == part && t->cmds[i].state != C_DONE)
            return 0;
    return 1;
}

/* Send what a task may send now: its settling commands, and the recover
 * of each partition whose settling commands are all confirmed.  Returns 1
 * when the task is finished. */
static int advance(struct settler *st, struct settle_task *t)
{
    size_t last = t->ncmds - t->parts.n, sent = 0, recovered = 0;
    for (size_t i = 0; i < last; i++) {
        send_cmd(st, &t->cmds[i]);
        sent += t->cmds[i].state == C_SENT;
    }
    for (size_t i = last; i < t->ncmds; i++) {
        if (part_settled(t, t->cmds[i].part))
            send_cmd(st, &t->cmds[i]);
        recovered += t->cmds[i].state == C_DONE;
        sent += t->cmds[i].state == C_SENT;
    }
    if (recovered == t->parts.n) {
        size_t moved = t->acked + t->failed + t->released;
        if (t->n > 0 || t->recovered > 0)
            log_info("%s: settled the %zu job%s it held: %zu acked, %zu failed, %zu given "
                     "back, %zu already settled; %zu of a claim on its way given back",
                     t->who, t->n, t->n == 1 ? "" : "s", t->acked, t->failed, t->released,
                     t->n > moved ? t->n - moved : 0, t->recovered);
        t->done(t->done_arg, t->running_failed, t->running_dead);
        return 1;
    }
    if (sent == 0)
        log_partial(st, t);
    return sent == 0 && give_up(st, t);
}

static void pump(struct settler *st)
{
    int up = rconn_is_up(st->conn);
    struct settle_task **p = &st->tasks;
    while (*p) {
        struct settle_task *t = *p;
        if (up ? advance(st, t) : give_up(st, t)) {
            *p = t->next;
            task_free(t);
        } else {
            p = &t->next;
        }
    }
}

/* ---- building a settlement ---------------------------------------------- */

/* Copy the entries of `tables` that still need something done. */
static int copy_entries(struct settle_task *t, const struct slot_table *tables)
{
    size_t total = 0;
    for (int k = 0; k < SLOT_TABLES; k++)
        total += __atomic_load_n(&tables[k].n, __ATOMIC_ACQUIRE);
    t->e = calloc(total ? total : 1, sizeof *t->e);
    t->jobs = calloc(total ? total : 1, sizeof *t->jobs);
    if (!t->e || !t->jobs)
        return -1;
    for (int k = 0; k < SLOT_TABLES; k++) {
        uint32_t n = __atomic_load_n(&tables[k].n, __ATOMIC_ACQUIRE);
        for (uint32_t i = 0; i < n; i++) {
            const struct slot_entry *e = &tables[k].e[i];
            if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == SE_DONE)
                continue;
            t->e[t->n] = *e;
            t->jobs[t->n].id = t->e[t->n].id;
            t->jobs[t->n].fence = t->e[t->n].fence;
            t->n++;
        }
        t->table_end[k] = t->n;
        t->table_part[k] = __atomic_load_n(&tables[k].part, __ATOMIC_ACQUIRE);
    }
    return 0;
}

static struct settle_cmd *add_cmd(struct settle_task *t, int script, unsigned part)
{
    struct settle_cmd *c = &t->cmds[t->ncmds++];
    c->t = t;
    c->script = script;
    c->part = part;
    cmd_init(&c->cmd);
    return c;
}

/* The entries of t->e[from..end) in state `state`, gathered in
 * t->jobs[from..): their count.  Reorders t->e and t->jobs together. */
static size_t gather(struct settle_task *t, size_t from, size_t end, int state)
{
    size_t k = from;
    for (size_t i = from; i < end; i++)
        if (t->e[i].state == state) {
            struct slot_entry e = t->e[k];
            t->e[k] = t->e[i];
            t->e[i] = e;
            k++;
        }
    for (size_t i = from; i < end; i++) {
        t->jobs[i].id = t->e[i].id;
        t->jobs[i].fence = t->e[i].fence;
    }
    return k - from;
}

static void add_fail(struct settle_task *t, const struct settle_req *req, unsigned part,
                     const struct slot_entry *e)
{
    const struct queue_keys *keys = qparts_keys(&t->parts, part);
    struct settle_cmd *c = add_cmd(t, DQ_SCRIPT_FAIL, part);
    const char *type = e->state == SE_RUNNING ? req->running_type : e->type;
    dq_retry_policy policy = dconfig_retry_for(req->dc, req->q, type);
    if (e->state == SE_RUNNING) {
        c->running = e;
        proto_fail_cmd(&c->cmd, keys, e->id, e->fence, t->cause, DQ_FAIL_RETRY, -1,
                       &policy, (uint32_t)random());
    } else {
        proto_fail_cmd(&c->cmd, keys, e->id, e->fence, e->error,
                       e->state == SE_DEAD ? DQ_FAIL_DEAD : DQ_FAIL_RETRY,
                       e->retry_delay_ms, &policy, (uint32_t)random());
    }
}

/* The commands of table entries t->e[at..end), all of partition `part`:
 * one ack, a fail per failed or running job, one release. */
static void build_table_cmds(struct settle_task *t, const struct settle_req *req,
                             unsigned part, size_t at, size_t end)
{
    const struct queue_keys *keys = qparts_keys(&t->parts, part);
    size_t k;
    if ((k = gather(t, at, end, SE_OK)) > 0)
        proto_ack_cmd(&add_cmd(t, DQ_SCRIPT_ACK, part)->cmd, keys, &t->jobs[at], k);
    at += k;
    size_t failed = gather(t, at, end, SE_RETRY);
    failed += gather(t, at + failed, end, SE_DEAD);
    failed += gather(t, at + failed, end, SE_RUNNING);
    for (size_t i = at; i < at + failed; i++) {
        if (t->e[i].state == SE_RUNNING)
            snprintf(t->e[i].type, sizeof t->e[i].type, "%s", req->running_type);
        add_fail(t, req, part, &t->e[i]);
    }
    at += failed;
    if ((k = gather(t, at, end, SE_PENDING)) > 0)
        proto_release_cmd(&add_cmd(t, DQ_SCRIPT_RELEASE, part)->cmd, keys, &t->jobs[at], k);
}

/* The commands, in t->cmds: each table's (build_table_cmds, on the
 * partition it was claimed from), then recover on every partition, last:
 * a claim in flight when the worker died may have leased jobs in any. */
static int build_cmds(struct settle_task *t, const struct settle_req *req)
{
    t->cmds = calloc(t->n + 2 * SLOT_TABLES + t->parts.n, sizeof *t->cmds);
    if (!t->cmds)
        return -1;
    size_t at = 0;
    for (int k = 0; k < SLOT_TABLES; k++) {
        build_table_cmds(t, req, t->table_part[k], at, t->table_end[k]);
        at = t->table_end[k];
    }
    for (unsigned p = 0; p < t->parts.n; p++)
        proto_recover_cmd(&add_cmd(t, DQ_SCRIPT_RECOVER, p)->cmd, qparts_keys(&t->parts, p),
                          t->owner);
    for (size_t i = 0; i < t->ncmds; i++)
        if (t->cmds[i].cmd.oom)
            return -1;
    return 0;
}

int settler_settle(struct settler *st, const struct settle_req *req)
{
    struct settle_task *t = calloc(1, sizeof *t);
    if (!t)
        goto oom;
    t->st = st;
    t->done = req->done;
    t->done_arg = req->done_arg;
    snprintf(t->queue, sizeof t->queue, "%s", req->q->name);
    snprintf(t->who, sizeof t->who, "%s", req->who);
    snprintf(t->cause, sizeof t->cause, "%s", req->cause);
    snprintf(t->owner, sizeof t->owner, "%s", req->owner);
    if (qparts_init(&t->parts, &req->dc->redis, req->q->name,
                    (unsigned)req->q->partitions, 0, 1) < 0)
        goto oom;
    t->give_up_ms = req->died_ms + req->q->lease_ms;
    if (copy_entries(t, req->tables) < 0 || build_cmds(t, req) < 0)
        goto oom;
    t->next = st->tasks;
    st->tasks = t;
    pump(st);
    return 0;
oom:
    if (t)
        task_free(t);
    log_err("%s: out of memory settling its jobs; trying again", req->who);
    return -1;
}
