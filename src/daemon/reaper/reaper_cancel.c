#include "daemon/reaper/reaper_cancel.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/dconfig_parts.h"
#include "daemon/log.h"
#include "lib/proto.h"
#include "redis/rconn.h"

/* How often requests for jobs claimed here but not started are matched
 * again, and how many are kept: a batch's jobs start one after another,
 * each within its lease, after which it cannot start here any more. */
#define SCAN_MS 50
#define PENDING_MAX 64

/* A partition this reaper listens to: its hash tag names it in messages. */
struct cancel_part {
    char channel[sizeof ((struct queue_keys *)0)->wake];
    char tag[DQ_QUEUE_MAX + 16];
    const struct queue_conf *q;
    unsigned part;
    struct queue_keys keys;
};

/* A request for a job that is claimed here and has not started. */
struct cancel_pending {
    int64_t fence;
    int64_t until_ms;           /* monotonic: given up after this */
    const struct queue_conf *q;
    char id[DQ_ID_MAX + 1];
};

struct reaper_cancel;

/* A show sent after (re)subscribing, for the job a worker runs. */
struct cancel_check {
    struct reaper_cancel *rc;
    const struct queue_conf *q;
    int64_t fence;
    char id[DQ_ID_MAX + 1];
};

struct reaper_cancel {
    const struct reaper_args *a;
    struct rconn *sub, *cmd;    /* cmd: the reaper's, borrowed */
    struct event *scan;
    struct cancel_part *parts;
    size_t nparts;
    struct cancel_pending pending[PENDING_MAX];
    size_t npending;
};

/* The hash tag of a partition, from its wake channel "P:{TAG}:wake";
 * "" when it has none (never: keys_build writes one). */
static void tag_of(const char *channel, char *tag, size_t len)
{
    const char *open = strchr(channel, '{');
    const char *close = open ? strchr(open, '}') : NULL;
    size_t n = close ? (size_t)(close - open - 1) : 0;
    if (!close || n >= len)
        n = 0;
    memcpy(tag, close ? open + 1 : "", n);
    tag[n] = '\0';
}

/* The row of the worker that runs `id` of `q` under `fence` now, or -1. */
static int running_row(const struct reaper_cancel *rc, const struct queue_conf *q,
                       int64_t fence, const char *id)
{
    for (size_t i = 0; i < rc->a->n; i++) {
        struct slot_job job;
        if (slot_read_job(&rc->a->slots[i], &job) && job.fence == fence
            && strcmp(job.id, id) == 0 && strcmp(job.queue, q->name) == 0)
            return (int)i;
    }
    return -1;
}

/* The row of a worker here that holds `id` under `fence` claimed and not
 * finished (not started, or just started: its slot may not show it yet),
 * or -1.  The tables are read while their worker writes them: a torn
 * entry only makes a request kept or dropped a scan early or late; what
 * the worker and the supervisor act on is matched by fence and id. */
static int claimed_row(const struct reaper_cancel *rc, int64_t fence, const char *id)
{
    for (size_t i = 0; i < rc->a->n; i++)
        for (int t = 0; t < SLOT_TABLES; t++) {
            const struct slot_table *tb = &rc->a->slots[i].tables[t];
            uint32_t n = __atomic_load_n(&tb->n, __ATOMIC_ACQUIRE);
            for (uint32_t k = 0; k < n && k < DQ_CLAIM_MAX; k++) {
                int st = __atomic_load_n(&tb->e[k].state, __ATOMIC_ACQUIRE);
                if (tb->e[k].fence == fence && (st == SE_PENDING || st == SE_RUNNING)
                    && strncmp(tb->e[k].id, id, sizeof tb->e[k].id) == 0)
                    return (int)i;
            }
        }
    return -1;
}

/* Whether row `row` asks nothing of the job its worker runs now, so that
 * it may carry a request for a job that worker has not started. */
static int row_free(const struct reaper_cancel *rc, int row)
{
    struct slot_job job;
    return !slot_read_job(&rc->a->slots[row], &job)
           || !cancel_request_matches(&rc->a->cancels[row], job.fence, job.id, NULL);
}

/* Post the request if the job runs here now; 1 when it is posted (now,
 * or already: a second post would restart its cancel_grace). */
static int post_if_running(struct reaper_cancel *rc, const struct queue_conf *q,
                           int64_t fence, const char *id)
{
    int row = running_row(rc, q, fence, id);
    if (row < 0)
        return 0;
    if (cancel_request_matches(&rc->a->cancels[row], fence, id, NULL))
        return 1;
    cancel_request_post(&rc->a->cancels[row], fence, id, slots_now_ms());
    log_info("queue=%s: job %s (fence %lld) was cancelled while running in row %d: "
             "stopping it", q->name, id, (long long)fence, row);
    return 1;
}

/*
 * Act on a request to stop `id` of `q` under `fence`: post it to the
 * worker that runs it; or, for a job a worker holds and has not started,
 * post it where that worker looks before it starts a job (while its row
 * asks nothing of the job it runs: a cancel of that one comes first), so
 * that it never starts.  Returns 1 when nothing is left to do: posted to
 * the run, or not held here (someone else's, or over); 0 to look again.
 */
static int act(struct reaper_cancel *rc, const struct queue_conf *q, int64_t fence,
               const char *id)
{
    if (post_if_running(rc, q, fence, id))
        return 1;
    int row = claimed_row(rc, fence, id);
    if (row < 0)
        return 1;
    if (row_free(rc, row) && !cancel_request_matches(&rc->a->cancels[row], fence, id, NULL))
        cancel_request_post(&rc->a->cancels[row], fence, id, slots_now_ms());
    return 0;
}

static void arm_scan(struct reaper_cancel *rc)
{
    struct timeval tv = { 0, SCAN_MS * 1000 };
    if (evtimer_add(rc->scan, &tv) < 0)
        log_err("cannot arm the cancel scan: %zu cancelled job%s claimed here may run "
                "to their end", rc->npending, rc->npending == 1 ? "" : "s");
}

static void keep_pending(struct reaper_cancel *rc, const struct queue_conf *q,
                         int64_t fence, const char *id)
{
    if (rc->npending == PENDING_MAX) {
        log_warn("queue=%s: more than %d cancelled jobs wait to start here: job %s will "
                 "run to its end (it is cancelled in Redis all the same)", q->name,
                 PENDING_MAX, id);
        return;
    }
    struct cancel_pending *p = &rc->pending[rc->npending++];
    p->fence = fence;
    p->q = q;
    p->until_ms = slots_now_ms() + q->lease_ms;
    snprintf(p->id, sizeof p->id, "%s", id);
    if (rc->npending == 1)
        arm_scan(rc);
}

static void on_scan(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct reaper_cancel *rc = arg;
    int64_t now = slots_now_ms();
    for (size_t i = 0; i < rc->npending;) {
        struct cancel_pending *p = &rc->pending[i];
        /* Started and posted, no longer held here (skipped, given
         * back, or its worker died: settled), or past its lease. */
        if (act(rc, p->q, p->fence, p->id) || now > p->until_ms)
            *p = rc->pending[--rc->npending];
        else
            i++;
    }
    if (rc->npending)
        arm_scan(rc);
}

static void on_checked(struct rconn *conn, redisReply *reply, void *arg)
{
    (void)conn;
    struct cancel_check *ck = arg;
    dq_job_info info;
    if (reply && proto_show_reply(reply, &info, NULL) == DQ_OK) {
        if (info.state == DQ_STATE_CANCELLED && info.job.fence == ck->fence)
            post_if_running(ck->rc, ck->q, ck->fence, ck->id);
        dq_job_info_free(&info);
    }
    free(ck);
}

/*
 * The subscription and the command connection are both (again) up: a
 * cancel published while either was down may have been missed, so ask
 * Redis about each job that runs here now (a read-only show each, a few
 * at most: one per worker) and stop those cancelled under the fence they
 * run with.
 */
static void check_running(struct reaper_cancel *rc)
{
    if (!rconn_is_up(rc->sub) || !rconn_is_up(rc->cmd))
        return;                 /* the other one's coming up calls this */
    for (size_t i = 0; i < rc->a->n; i++) {
        struct slot_job job;
        if (!slot_read_job(&rc->a->slots[i], &job))
            continue;
        const struct cancel_part *p = NULL;
        for (size_t k = 0; k < rc->nparts && !p; k++)
            if (rc->parts[k].part == job.part && strcmp(rc->parts[k].q->name, job.queue) == 0)
                p = &rc->parts[k];
        struct cancel_check *ck = p ? calloc(1, sizeof *ck) : NULL;
        if (!ck)
            continue;           /* not our queue (an older generation's) */
        *ck = (struct cancel_check){ .rc = rc, .q = p->q, .fence = job.fence };
        snprintf(ck->id, sizeof ck->id, "%s", job.id);
        struct cmd cmd;
        cmd_init(&cmd);
        proto_show_cmd(&cmd, &p->keys, job.id, false);
        if (rconn_send(rc->cmd, &cmd, DQ_SCRIPT_SHOW, on_checked, ck) < 0)
            free(ck);           /* down: the next time it is up, we ask again */
        cmd_free(&cmd);
    }
}

static void on_subscribed(struct rconn *conn, void *arg)
{
    (void)conn;
    struct reaper_cancel *rc = arg;
    log_info("listening for cancels of running jobs on %zu channel%s", rc->nparts,
             rc->nparts == 1 ? "" : "s");
    check_running(rc);
}

void reaper_cancel_up(struct reaper_cancel *rc)
{
    check_running(rc);
}

static void on_message(struct rconn *conn, const char *channel, const char *payload,
                       size_t len, void *arg)
{
    (void)conn;
    (void)channel;
    struct reaper_cancel *rc = arg;
    int64_t fence;
    char id[DQ_ID_MAX + 1], tag[DQ_QUEUE_MAX + 16];
    if (!cancel_message_parse(payload, len, &fence, id, sizeof id, tag, sizeof tag))
        return;                 /* a wake or a pause: the workers' */
    const struct queue_conf *q = NULL;
    for (size_t i = 0; i < rc->nparts && !q; i++)
        if (strcmp(rc->parts[i].tag, tag) == 0)
            q = rc->parts[i].q;
    if (q && !act(rc, q, fence, id))
        keep_pending(rc, q, fence, id);
}

struct reaper_cancel *reaper_cancel_new(struct event_base *base, const struct reaper_args *a,
                                        struct rconn *cmd)
{
    struct reaper_cancel *rc = calloc(1, sizeof *rc);
    size_t n = dconfig_parts_count(a->dc);
    const char **channels = calloc(n ? n : 1, sizeof *channels);
    if (!rc || !channels)
        goto fail;
    rc->a = a;
    rc->cmd = cmd;
    rc->parts = calloc(n ? n : 1, sizeof *rc->parts);
    rc->scan = evtimer_new(base, on_scan, rc);
    struct rconn_events ev = { on_subscribed, NULL, rc, NULL };
    rc->sub = rconn_from_conf(base, &a->dc->redis, "cancels", &ev);
    if (!rc->parts || !rc->scan || !rc->sub)
        goto fail;
    struct dconfig_part it;
    for (dconfig_parts_begin(&it, a->dc); dconfig_parts_next(&it);) {
        struct cancel_part *p = &rc->parts[rc->nparts];
        memcpy(p->channel, it.keys.wake, sizeof p->channel);
        tag_of(p->channel, p->tag, sizeof p->tag);
        p->q = it.q;
        p->part = it.part;
        p->keys = it.keys;
        channels[rc->nparts++] = p->channel;
    }
    if (rconn_subscribe_many(rc->sub, channels, n, on_message, rc) < 0)
        goto fail;
    rconn_count_reconnects(rc->sub, &a->slot->redis_reconnects);
    rconn_start(rc->sub);
    free(channels);
    return rc;
fail:
    free(channels);
    reaper_cancel_free(rc);
    return NULL;
}

void reaper_cancel_free(struct reaper_cancel *rc)
{
    if (!rc)
        return;
    rconn_free(rc->sub);
    if (rc->scan)
        event_free(rc->scan);
    free(rc->parts);
    free(rc);
}
