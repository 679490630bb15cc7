#include "daemon/worker/worker.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/exitcodes.h"
#include "daemon/worker/handlers.h"
#include "daemon/log.h"
#include "daemon/qparts.h"
#include "redis/rconn.h"
#include "daemon/signals.h"
#include "daemon/worker/wake.h"
#include "lib/proto.h"

/* Longest sleep without a claim: bounds the cost of a lost wake message,
 * and keeps an idle worker at one command per IDLE_CAP_MS. */
#define IDLE_CAP_MS 60000
/* Wake this long after the estimated due instant: waking before it costs
 * an empty claim and a second sleep, which is later still. */
#define WAKE_MARGIN_US 250
#define RETRY_AFTER_ERROR_MS 1000
/* A paused worker sends no claim; it learns of the resume from the wake
 * channel, and reads the state after its subscription is made again (a
 * message may have been lost meanwhile).  This slow poll of the state
 * bounds what any other loss could cost. */
#define PAUSE_POLL_MS 5000
/* Between the jobs of a batch, a worker looks at its messages (a pause)
 * whenever this long has passed since it last did: at most one job
 * starts after a pause message has reached a worker, unless the jobs since
 * its last look took less than this together. */
#define RUN_LOOK_US 1000
#define STOP_POLL_MS 100
/* An orphan (its supervisor died) leaves its loop when this little is left
 * of its bound (signals_orphan_ms_left): about two ticks, for the exit. */
#define ORPHAN_MARGIN_MS 250
/* A job starts only while its lease outlasts its handler's timeout by this
 * much: the supervisor's tick (50 ms) may pass before it kills an overrun,
 * and the kill and the failure it sends take a few more.  So a handler can
 * never still be running when its lease expires and the job is claimed
 * again.  (The configuration asks for leases 1 s longer than any timeout,
 * so a freshly claimed job always has this much.) */
#define START_MARGIN_MS 500
/* Reports of a batch of `batch` jobs: one ack per renewal and at the end,
 * a fail per job, one release. */
#define MAX_REPORTS(batch) (2 * (size_t)(batch) + 4)

enum worker_state {
    W_IDLE,         /* about to claim */
    W_CLAIMING,     /* claim sent */
    W_RUNNING,      /* running the batch */
    W_RENEWING,     /* mid-batch: what finished is reported and the rest's
                       leases renewed, replies awaited */
    W_REPORTING,    /* acks, fails and releases sent, replies awaited */
    W_SLEEPING,     /* nothing due, or paused: waiting for the timer or a
                       wake message */
    W_POLLING       /* paused: pause_state sent, reply awaited */
};

/* The claim a worker sends with the reports of a full batch (more jobs are
 * due), so that Redis has the next claim in hand while it runs the ack:
 * one round trip per batch instead of two, and Redis is kept busy. */
enum claim_ahead {
    AHEAD_NONE,
    AHEAD_SENT,     /* reply awaited */
    AHEAD_READY     /* claimed into w->next before the reports were settled */
};

struct worker;

/* One result to send: the ack of the batch's successes, one fail, or the
 * release of the jobs not started.  Kept until Redis confirmed it, so that
 * it is re-sent after a reconnect instead of being lost. */
struct report {
    struct worker *w;
    struct cmd cmd;
    int script;
    int done;
    /* The fail's error text: cmd borrows its strings until Redis answers,
     * long after the handler's outcome (on run_job's stack) is gone. */
    char error[sizeof ((dq_handler_outcome *)0)->error];
    char what[700];     /* for the log line: queue, id, type, attempt, error */
    struct slot_type *counts;   /* a fail's: its type's counters, by outcome */
};

struct worker {
    struct event_base *base;
    const struct daemon_conf *dc;
    const struct queue_conf *q;
    unsigned rank;              /* this worker is number `rank` of q->workers */
    struct qparts parts;        /* the queue's partitions: keys, claim order */
    unsigned claim_part;        /* the partition of the claim in flight */
    unsigned batch_part;        /* ... of batch's jobs (all from one claim) */
    unsigned next_part;         /* ... of next's */
    struct worker_slot *slot;
    struct handler_table handlers;
    struct rconn *cmd, *sub;
    struct event *wake_timer, *run_ev, *stop_poll;
    enum worker_state state;
    dq_claim_result batch;
    int table;                  /* the slot table that lists batch's jobs */
    size_t run_i;               /* the next job of batch to run */
    int64_t lease_end_us;       /* monotonic: the leases of batch's jobs not
                                   started yet end no sooner than this */
    dq_job *ok;                 /* finished jobs not reported yet (shallow:
                                   batch owns the strings); room for q->batch */
    size_t nok;
    bool *held;                 /* a renewal's reply, per job; q->batch */
    struct cmd renew;           /* the renewal in flight, if renew_sent */
    int renew_sent, renew_done;
    int64_t renew_sent_us;
    dq_claim_result next;       /* the claim ahead's jobs, when AHEAD_READY */
    enum claim_ahead ahead;
    struct report *reports;     /* room for MAX_REPORTS(q->batch) */
    size_t nreports, awaiting;
    const char *owner;          /* names this worker's claims (recover) */
    int64_t sleep_until_us;     /* monotonic */
    int64_t server_offset_us;   /* server clock - monotonic clock, from the
                                   last claim */
    int64_t claim_sent_us;      /* monotonic time the claim was sent */
    int64_t next_due_server;    /* server ms of the next due job; -1 none */
    int64_t woken_due;          /* server ms announced by a wake message that
                                   came while busy; -1 none */
    struct pause_view pause;    /* whether the queue is paused (wake.h) */
    int pause_recheck;          /* the subscription was remade while busy:
                                   read the state before sleeping paused */
    int64_t poll_sent_us;       /* monotonic time pause_state was sent */
    int64_t run_look_us;        /* monotonic: the run loop last looked at its
                                   messages */
    int stopping;
    int orphaned;               /* the supervisor's death was logged */
    int exit_code;              /* DAEMON_EXIT_OK, or why the loop was broken */
};

static void drive(struct worker *w);
static void claim_ahead(struct worker *w);

/* The Redis server's clock as this worker estimates it, in µs. */
static int64_t server_now_us(const struct worker *w)
{
    return slots_now_us() + w->server_offset_us;
}

static int64_t server_now(const struct worker *w)
{
    return server_now_us(w) / 1000;
}

/* The keys of the batch's partition: its reports go there, since every
 * job of a claim comes from the partition claimed. */
static const struct queue_keys *batch_keys(const struct worker *w)
{
    return qparts_keys(&w->parts, w->batch_part);
}

/* Learn the server's clock from a claim's reply.  The script read TIME
 * (truncated to the ms) somewhere between sending and receiving, so take
 * the middle of both, and the middle of that ms: the estimate is then off
 * by less than half the round trip, where the ms alone would be off by up
 * to a whole one. */
static void learn_server_clock(struct worker *w, int64_t server_ms)
{
    int64_t mid = (w->claim_sent_us + slots_now_us()) / 2;
    w->server_offset_us = server_ms * 1000 + 500 - mid;
}

/* ---- sleeping and waking ------------------------------------------------ */

static void sleep_for_us(struct worker *w, int64_t us)
{
    if (us < 0 || us > (int64_t)IDLE_CAP_MS * 1000)
        us = (int64_t)IDLE_CAP_MS * 1000;
    w->state = W_SLEEPING;
    w->sleep_until_us = slots_now_us() + us;
    struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };
    evtimer_add(w->wake_timer, &tv);
}

static void sleep_for(struct worker *w, int64_t ms)
{
    sleep_for_us(w, ms < 0 ? -1 : ms * 1000);
}

static void on_wake_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    if (w->state == W_SLEEPING)
        w->state = W_IDLE;
    drive(w);
}

/* The server ms to sleep towards after a claim or a batch: the next due
 * job the claim reported, or sooner if a wake message said so meanwhile. */
static int64_t take_next_due(struct worker *w)
{
    int64_t next = w->next_due_server;
    if (w->woken_due >= 0 && (next < 0 || w->woken_due < next))
        next = w->woken_due;
    w->woken_due = -1;
    return next;
}

/* Sleep until the server time `due` (-1: nothing is delayed), or claim at
 * once when it has come.  Paused: sleep until the next poll of the state
 * (at once when the subscription was remade meanwhile), or a message. */
static void sleep_until_due(struct worker *w, int64_t due)
{
    int64_t us = due * 1000 - server_now_us(w) + WAKE_MARGIN_US;
    if (w->pause.paused && w->pause_recheck)
        drive(w);
    else if (w->pause.paused)
        sleep_for(w, PAUSE_POLL_MS);
    else if (due < 0)
        sleep_for(w, -1);
    else if (us > 0)
        sleep_for_us(w, us);
    else
        drive(w);
}

/* One line when the pause state changes (not again for a reply or a
 * message that repeats it). */
static void log_pause_change(const struct worker *w, bool was_paused)
{
    if (w->pause.paused != was_paused)
        log_info("queue=%s: %s", w->q->name, w->pause.paused ? "paused: claiming no more jobs"
                                                              : "resumed: claiming again");
}

/* A reply said whether the queue is paused (pause_view_observe). */
static void observe_pause(struct worker *w, bool paused, int64_t server_ms, int64_t sent_us)
{
    bool was = w->pause.paused;
    pause_view_observe(&w->pause, paused, server_ms, sent_us);
    log_pause_change(w, was);
}

/* The queue was paused or resumed (wake.h).  A sleeping worker sleeps
 * paused, or claims at once; a busy one starts no further job of its batch
 * (on_run), or claims when it is done. */
static void on_pause_message(struct worker *w, bool paused, int64_t ms)
{
    bool was = w->pause.paused;
    pause_view_hear(&w->pause, paused, ms, slots_now_us());
    log_pause_change(w, was);
    if (w->state != W_SLEEPING) {
        if (!paused)
            w->woken_due = 0;   /* a claim in flight may say paused still */
        return;
    }
    evtimer_del(w->wake_timer);
    w->state = W_IDLE;
    if (paused)
        sleep_for(w, PAUSE_POLL_MS);
    else
        drive(w);
}

/* A producer made a job due sooner than the head we sleep towards: wake at
 * its due time instead, on our own precise timer.  A worker that is busy
 * (claiming, running, reporting) keeps the time for when it is done: the
 * claim it made may predate the job, and the message comes only once.
 * A paused worker has no use for it: it claims when it is resumed. */
static void on_wake_message(struct rconn *rc, const char *payload, size_t len, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    int64_t due;
    enum wake_kind kind = wake_parse(payload, len, &due);
    if (kind == WAKE_PAUSE || kind == WAKE_RESUME) {
        on_pause_message(w, kind == WAKE_PAUSE, due);
        return;
    }
    if (kind != WAKE_DUE || w->pause.paused)
        return;
    if (w->state != W_SLEEPING) {
        if (w->woken_due < 0 || due < w->woken_due)
            w->woken_due = due;
        return;
    }
    int64_t delay = due * 1000 - server_now_us(w) + WAKE_MARGIN_US;
    if (delay < 0)
        delay = 0;
    if (slots_now_us() + delay < w->sleep_until_us)
        sleep_for_us(w, delay);
}

/* ---- reporting results -------------------------------------------------- */

static struct report *add_report(struct worker *w, int script)
{
    struct report *r = &w->reports[w->nreports++];
    memset(r, 0, sizeof *r);
    r->w = w;
    cmd_init(&r->cmd);
    r->script = script;
    return r;
}

static void free_reports(struct worker *w)
{
    for (size_t i = 0; i < w->nreports; i++)
        cmd_free(&w->reports[i].cmd);
    w->nreports = 0;
    w->awaiting = 0;
}

/* One line per failed job, with what became of it. */
static void log_fail_reply(const struct report *r, const redisReply *reply)
{
    dq_fail_result res;
    dq_status st = proto_fail_reply(reply, &res);
    if (st == DQ_OK && r->counts)
        slot_add(res.dead ? &r->counts->counters.dead : &r->counts->counters.retried, 1);
    else if (st == DQ_ERR_STALE)
        slot_add(&r->w->slot->stale, 1);
    if (st == DQ_ERR_STALE)
        log_warn("%s -> not recorded: the lease had expired", r->what);
    else if (st == DQ_OK && res.dead)
        log_warn("%s -> dead", r->what);
    else if (st == DQ_OK)
        log_warn("%s -> retry in %lldms", r->what,
                 (long long)(res.at_ms - server_now(r->w)));
}

static void count_acks(struct worker *w, const redisReply *reply, size_t n)
{
    bool acked[DQ_CLAIM_MAX];
    if (proto_ack_reply(reply, n, acked) != DQ_OK)
        return;
    for (size_t i = 0; i < n; i++)
        if (!acked[i]) {
            slot_add(&w->slot->stale, 1);
            log_warn("queue=%s: ack refused (lease expired): the job may run again",
                     w->q->name);
        }
}

static void send_reports(struct worker *w);

static void start_batch(struct worker *w);
static void resume_after_renewal(struct worker *w);

/* The batch is settled: take the claim sent ahead, or sleep until the next
 * due job, or claim again. */
static void finish_batch(struct worker *w)
{
    free_reports(w);
    dq_claim_result_free(&w->batch);
    slot_table_clear(w->slot, w->table);    /* all of it is settled in Redis */
    if (w->ahead == AHEAD_SENT) {
        w->state = W_CLAIMING;  /* on_claim goes on */
        return;
    }
    w->state = W_IDLE;
    if (w->ahead == AHEAD_READY) {
        w->ahead = AHEAD_NONE;
        w->batch = w->next;
        w->batch_part = w->next_part;
        w->table ^= 1;          /* keep_claim_ahead listed them there */
        memset(&w->next, 0, sizeof w->next);
        start_batch(w);
        return;
    }
    /* A claim sent ahead that failed is tried again now, not after a
     * sleep: /healthz would report claims failing all that while. */
    if (signals_stop_requested() || w->slot->claims.failing_since_ms)
        drive(w);
    else
        sleep_until_due(w, take_next_due(w));
}

static void on_resend_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    send_reports(arg);
}

static void on_report_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct report *r = arg;
    struct worker *w = r->w;
    w->awaiting--;
    if (reply && reply->type != REDIS_REPLY_ERROR) {
        r->done = 1;
        if (r->script == DQ_SCRIPT_FAIL)
            log_fail_reply(r, reply);
        else if (r->script == DQ_SCRIPT_ACK)
            count_acks(w, reply, (size_t)(r->cmd.argc - 3 - KEYS_PER_SCRIPT) / 2);
    }
    if (w->awaiting > 0)
        return;
    for (size_t i = 0; i < w->nreports; i++)
        if (!w->reports[i].done) {
            /* A lost connection re-sends from on_cmd_up; an error reply
             * (Redis refusing writes) is tried again after a pause.  So is
             * a report no replica confirmed (durability "replicated"): it
             * is done on the master, where the second one finds the lease
             * gone and changes nothing, but the batch is settled only once
             * a replica has it; after a failover to a replica without it,
             * the job still holds its lease there under the same fence
             * (the claim was replicated), so the report sent again to the
             * new master applies it and the job does not run twice. */
            if (rconn_is_up(w->cmd)) {
                struct timeval tv = { RETRY_AFTER_ERROR_MS / 1000, 0 };
                event_base_once(w->base, -1, EV_TIMEOUT, on_resend_timer, w, &tv);
            }
            return;
        }
    if (w->state == W_RENEWING)
        resume_after_renewal(w);
    else
        finish_batch(w);
}

/* A report or renewal that could not be built (out of memory) can never
 * be sent: stop the worker rather than hold its batch for ever.  The
 * supervisor then settles the slot table (acks what finished, applies the
 * failures, gives back the rest), so no job waits on this worker. */
static void give_up(struct worker *w, const char *what)
{
    log_err("queue=%s: out of memory building %s: stopping; the supervisor settles "
            "the batch", w->q->name, what);
    w->exit_code = DAEMON_EXIT_SOFTWARE;
    event_base_loopbreak(w->base);
}

static void send_reports(struct worker *w)
{
    if ((w->state != W_REPORTING && w->state != W_RENEWING) || w->awaiting > 0)
        return;
    int stuck = 0;
    for (size_t i = 0; i < w->nreports; i++) {
        struct report *r = &w->reports[i];
        if (r->done)
            continue;
        if (r->cmd.oom) {
            give_up(w, "a report");
            return;
        }
        if (rconn_send(w->cmd, &r->cmd, r->script, on_report_reply, r) < 0) {
            stuck = 1;  /* not up: on_cmd_up sends the rest */
            break;
        }
        w->awaiting++;
    }
    /* Up but nothing went (out of memory queueing it): no reply will come
     * to try again from, so a timer does.  (When some went, the last
     * reply does: on_report_reply.) */
    if (stuck && w->awaiting == 0 && rconn_is_up(w->cmd)) {
        struct timeval tv = { RETRY_AFTER_ERROR_MS / 1000, 0 };
        event_base_once(w->base, -1, EV_TIMEOUT, on_resend_timer, w, &tv);
    }
}

/* ---- running jobs ------------------------------------------------------- */

static int attempts_allowed(const struct worker *w, const dq_job *job)
{
    if (job->max_attempts > 0)
        return job->max_attempts;
    return dconfig_max_attempts(w->dc, w->q, job->type);
}

/* A failed job: its report, sent with the batch's, and its entry in the
 * slot table, so that the failure is applied even if this worker dies
 * before the report is. */
static void report_failure(struct worker *w, size_t i, dq_fail_mode mode,
                           int64_t delay_ms, const char *error)
{
    const dq_job *job = &w->batch.jobs[i];
    struct report *r = add_report(w, DQ_SCRIPT_FAIL);
    dq_retry_policy policy = w->q->retry;
    policy.default_max_attempts = dconfig_max_attempts(w->dc, w->q, job->type);
    snprintf(r->error, sizeof r->error, "%s", error);
    r->counts = slot_type_entry(w->slot, job->type);
    proto_fail_cmd(&r->cmd, batch_keys(w), job->id, job->fence, r->error, mode, delay_ms,
                   &policy, (uint32_t)random());
    snprintf(r->what, sizeof r->what, "job failed: queue=%s id=%s type=%s attempt=%d/%d error=%s",
             w->q->name, job->id, job->type, job->attempt, attempts_allowed(w, job), error);
    slot_entry_fail(w->slot, w->table, i, mode == DQ_FAIL_DEAD ? SE_DEAD : SE_RETRY,
                    job->type, delay_ms, error);
}

/* Run job i of the batch through its handler `e` (NULL: none); its
 * outcome joins the reports.  The slot shows the job while it runs, so
 * that the supervisor can stop it at its timeout and fail it if the worker
 * dies. */
static void run_job(struct worker *w, size_t i, struct handler_entry *e)
{
    const dq_job *job = &w->batch.jobs[i];
    struct slot_type *st = slot_type_entry(w->slot, job->type);
    if (!job->type[0]) {
        /* A record this version cannot decode: no handler can run it. */
        report_failure(w, i, DQ_FAIL_DEAD, -1, job->last_error);
        return;
    }
    if (!e) {
        char why[200];
        snprintf(why, sizeof why, "no handler for type '%s'", job->type);
        report_failure(w, i, DQ_FAIL_DEAD, -1, why);
        return;
    }
    struct slot_job sj = { .fence = job->fence, .attempt = job->attempt,
                           .started_ms = slots_now_ms(), .timeout_ms = e->conf->timeout_ms };
    snprintf(sj.id, sizeof sj.id, "%s", job->id);
    snprintf(sj.type, sizeof sj.type, "%s", job->type);
    slot_entry_set(w->slot, w->table, i, SE_RUNNING);
    slot_set_job(w->slot, &sj);
    dq_handler_job hj = {
        .queue = w->q->name, .id = job->id, .type = job->type,
        .payload = job->payload, .payload_len = job->payload_len,
        .attempt = job->attempt, .max_attempts = attempts_allowed(w, job),
        .due_ms = job->due_ms, .created_ms = job->created_ms,
        .last_error = job->last_error,
    };
    dq_handler_outcome out;
    int64_t late_us = (server_now(w) - job->due_ms) * 1000;
    slot_hist_observe(&st->lateness, late_us);
    if (job->priority >= 0 && job->priority < DQ_PRIORITY_LEVELS)
        slot_hist_observe(&w->slot->lateness_by_priority[job->priority], late_us);
    int64_t start_us = slots_now_us();
    dq_handler_result res = handler_run(&e->lh, &hj, &out);
    slot_hist_observe(&st->duration, slots_now_us() - start_us);
    if (res == DQ_HANDLER_OK)
        slot_entry_set(w->slot, w->table, i, SE_OK);
    slot_set_job(w->slot, NULL);
    slot_add(&w->slot->jobs_done, 1);
    if (res == DQ_HANDLER_OK) {
        slot_add(&st->counters.succeeded, 1);
        log_debug("job done: queue=%s id=%s type=%s attempt=%d in %lldms", w->q->name,
                  job->id, job->type, job->attempt, (long long)(slots_now_ms() - sj.started_ms));
        w->ok[w->nok++] = *job;     /* shallow: the batch owns the strings */
        return;
    }
    report_failure(w, i, res == DQ_HANDLER_RETRY ? DQ_FAIL_RETRY : DQ_FAIL_DEAD,
                   res == DQ_HANDLER_RETRY ? out.retry_delay_ms : -1, out.error);
}

/* Whether a job for handler `e` may start now: its lease must outlast the
 * handler's timeout (START_MARGIN_MS).  A job no handler runs needs no
 * time. */
static int lease_covers(const struct worker *w, const struct handler_entry *e)
{
    if (!e)
        return 1;
    int64_t need_us = (e->conf->timeout_ms + START_MARGIN_MS) * 1000;
    return w->lease_end_us - slots_now_us() >= need_us;
}

/* The successes since the last report go out as one ack. */
static void report_successes(struct worker *w)
{
    if (w->nok == 0)
        return;
    proto_ack_cmd(&add_report(w, DQ_SCRIPT_ACK)->cmd, batch_keys(w), w->ok, w->nok);
    w->nok = 0;
}

static void send_renewal(struct worker *w);

/* The rest of a long batch would start on leases too short for its
 * handlers: report what has finished (so no finished job's lease runs out
 * before its ack) and renew the leases of the jobs not started, in one
 * round trip; the batch goes on when both are settled. */
static void start_renewal(struct worker *w)
{
    report_successes(w);
    cmd_free(&w->renew);
    cmd_init(&w->renew);
    proto_renew_cmd(&w->renew, batch_keys(w), w->q->lease_ms, &w->batch.jobs[w->run_i],
                    w->batch.n - w->run_i);
    w->renew_sent = w->renew_done = 0;
    w->state = W_RENEWING;
    log_debug("queue=%s: renewing the leases of %zu jobs not started", w->q->name,
              w->batch.n - w->run_i);
    send_reports(w);
    send_renewal(w);
}

static void on_renew_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    send_renewal(arg);
}

static void on_renew_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    w->renew_sent = 0;
    size_t n = w->batch.n - w->run_i;
    bool *held = w->held;       /* room for q->batch >= n (worker_setup) */
    int64_t now_ms;
    if (!reply)
        return;                 /* connection lost: on_cmd_up sends it again */
    if (proto_renew_reply(reply, n, &now_ms, held) != DQ_OK) {
        if (reply->type != REDIS_REPLY_ERROR)
            log_err("queue=%s: unexpected reply to renew", w->q->name);
        struct timeval tv = { RETRY_AFTER_ERROR_MS / 1000, 0 };
        event_base_once(w->base, -1, EV_TIMEOUT, on_renew_timer, w, &tv);
        return;
    }
    for (size_t k = 0; k < n; k++)
        if (!held[k]) {
            /* Reaped meanwhile (Redis was out of reach too long): another
             * worker may run it now, so this one must not. */
            slot_entry_set(w->slot, w->table, w->run_i + k, SE_DONE);
            log_warn("queue=%s: job %s not started: its lease was lost before its turn",
                     w->q->name, w->batch.jobs[w->run_i + k].id);
        }
    w->lease_end_us = w->renew_sent_us + w->q->lease_ms * 1000;
    w->renew_done = 1;
    resume_after_renewal(w);
}

static void send_renewal(struct worker *w)
{
    if (w->state != W_RENEWING || w->renew_sent || w->renew_done)
        return;
    if (w->renew.oom) {
        give_up(w, "a renewal");
        return;
    }
    w->renew_sent_us = slots_now_us();
    if (rconn_send(w->cmd, &w->renew, DQ_SCRIPT_RENEW, on_renew_reply, w) == 0) {
        w->renew_sent = 1;
    } else if (rconn_is_up(w->cmd)) {
        /* Out of memory queueing it: no reply will come to try again from. */
        struct timeval tv = { RETRY_AFTER_ERROR_MS / 1000, 0 };
        event_base_once(w->base, -1, EV_TIMEOUT, on_renew_timer, w, &tv);
    }
}

/* Both halves of a renewal are settled: run the rest of the batch. */
static void resume_after_renewal(struct worker *w)
{
    if (w->state != W_RENEWING || !w->renew_done || w->awaiting > 0)
        return;
    for (size_t i = 0; i < w->nreports; i++)
        if (!w->reports[i].done)
            return;
    w->state = W_RUNNING;
    event_active(w->run_ev, EV_TIMEOUT, 0);
}

/* Whether the run loop should hand control to the event loop before the
 * next job, so that a pause message waiting there is read first
 * (RUN_LOOK_US); if so, on_run is scheduled to go on after it. */
static int look_at_messages(struct worker *w)
{
    int64_t now = slots_now_us();
    if (now - w->run_look_us < RUN_LOOK_US)
        return 0;
    w->run_look_us = now;
    static const struct timeval zero = { 0, 0 };
    return event_add(w->run_ev, &zero) == 0;
}

/* Run the claimed batch, then report: one ack for the successes, one fail
 * per failure, one release for the jobs a stop or a pause left unstarted.
 * A job whose lease would not outlast its handler's timeout waits for a
 * renewal (start_renewal); the loop then resumes here, as it does after
 * looking at its messages (look_at_messages). */
static void on_run(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    dq_claim_result *b = &w->batch;
    for (; w->run_i < b->n && !signals_stop_requested() && !w->pause.paused; w->run_i++) {
        if (w->slot->tables[w->table].e[w->run_i].state == SE_DONE)
            continue;           /* its lease was lost: not ours to run */
        if (look_at_messages(w))
            return;
        const dq_job *job = &b->jobs[w->run_i];
        struct handler_entry *e = job->type[0] ? handlers_find(&w->handlers, job->type) : NULL;
        if (!lease_covers(w, e)) {
            start_renewal(w);
            return;
        }
        run_job(w, w->run_i, e);
    }
    report_successes(w);
    if (w->run_i < b->n) {
        log_info("%s: giving back %zu claimed job%s not started",
                 w->pause.paused ? "paused" : "stopping", b->n - w->run_i,
                 b->n - w->run_i == 1 ? "" : "s");
        proto_release_cmd(&add_report(w, DQ_SCRIPT_RELEASE)->cmd, batch_keys(w),
                          &b->jobs[w->run_i], b->n - w->run_i);
    }
    w->state = W_REPORTING;
    size_t unsent = 0;
    for (size_t i = 0; i < w->nreports; i++)
        unsent += !w->reports[i].done;
    if (unsent == 0) {
        finish_batch(w);
        return;
    }
    send_reports(w);
    if (w->awaiting == unsent && qparts_claim_now(&w->parts) && !signals_stop_requested()
        && !w->pause.paused)
        claim_ahead(w);
}

/* ---- claiming ----------------------------------------------------------- */

/* Read a claim's reply into *out.  A reply with more jobs than the claim
 * asked for is refused: the batch's buffers (worker_setup) hold q->batch
 * jobs.  Its jobs' leases then run out and the reaper gives them back. */
static dq_status read_claim(const struct worker *w, const redisReply *reply,
                            dq_claim_result *out)
{
    dq_status st = proto_claim_reply(reply, out);
    if (st == DQ_OK && out->n > (size_t)w->q->batch) {
        log_err("queue=%s: a claim for %d jobs returned %zu", w->q->name, w->q->batch,
                out->n);
        st = DQ_ERR_REDIS;
    }
    return st;
}

/* Tell the supervisor (/healthz) whether claims go through: a demoted
 * Redis refuses each one (READONLY, which rconn turns into a lost
 * connection) while it still answers reads. */
static void note_claim_outcome(struct worker *w, const redisReply *reply)
{
    if (!reply)
        slot_claims_failed(w->slot, rconn_last_failure(w->cmd));
    else if (reply->type == REDIS_REPLY_ERROR)
        slot_claims_failed(w->slot, reply->str);
    else
        slot_claims_ok(w->slot);
}

/* Tell the sweep (qparts.h) what the claim of `res` found. */
static void note_partition_claimed(struct worker *w, const dq_claim_result *res)
{
    qparts_claimed(&w->parts, res->next_due_in_ms == 0,
                   res->next_due_in_ms < 0 ? -1 : res->now_ms + res->next_due_in_ms);
}

/* A claim that was sent ahead came back before the reports of the batch
 * before were all settled (one is being retried after an error, or the
 * connection was lost): keep its jobs for finish_batch. */
static void keep_claim_ahead(struct worker *w, redisReply *reply)
{
    note_claim_outcome(w, reply);
    if (reply && read_claim(w, reply, &w->next) == DQ_OK) {
        observe_pause(w, proto_claim_paused(reply), w->next.now_ms, w->claim_sent_us);
        learn_server_clock(w, w->next.now_ms);
        slot_table_publish(w->slot, w->table ^ 1, w->claim_part, w->next.jobs, w->next.n);
        w->next_part = w->claim_part;
        note_partition_claimed(w, &w->next);
        w->ahead = AHEAD_READY;
    } else {
        dq_claim_result_free(&w->next);
        if (reply && reply->type != REDIS_REPLY_ERROR)
            log_err("queue=%s: unexpected reply to claim", w->q->name);
    }
}

static void on_recover_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    if (reply && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0)
        log_info("queue=%s: gave back %lld job%s of a claim no replica confirmed",
                 w->q->name, reply->integer, reply->integer == 1 ? "" : "s");
}

/*
 * A claim that no replica confirmed in time (durability "replicated"):
 * its jobs are leased on the master only.  A failover now would make them
 * due again on the promoted replica, where another worker would run them,
 * so this worker must not: it gives them back at once with recover (no
 * attempt counted, due time kept, as a release) rather than leave them to
 * the reaper, which counts an attempt per expired lease, so that a replica
 * down for long would send every job to the dead letters.  The recover may
 * not be replicated either: whichever server ends up the master has the
 * jobs due.  If the recover is lost with the connection, the leases expire
 * and the reaper gives the jobs back, an attempt counted.
 */
static void give_back_unreplicated(struct worker *w)
{
    struct cmd cmd;
    cmd_init(&cmd);
    proto_recover_cmd(&cmd, qparts_keys(&w->parts, w->claim_part), w->owner);
    if (rconn_send(w->cmd, &cmd, DQ_SCRIPT_RECOVER, on_recover_reply, w) < 0)
        log_warn("queue=%s: a claim was not replicated and its jobs cannot be given back "
                 "now; the reaper returns them when their leases expire", w->q->name);
    cmd_free(&cmd);
}

static void on_claim(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    int was_ahead = w->ahead == AHEAD_SENT;
    w->ahead = AHEAD_NONE;
    if (rconn_is_not_replicated(reply))
        give_back_unreplicated(w);
    if (was_ahead && w->state == W_REPORTING) {
        keep_claim_ahead(w, reply);
        w->slot->claim_in_flight = 0;
        return;
    }
    w->state = W_IDLE;
    note_claim_outcome(w, reply);
    if (!reply) {
        w->slot->claim_in_flight = 0;
        return;                 /* connection lost: on_cmd_up claims again */
    }
    dq_status st = read_claim(w, reply, &w->batch);
    if (st == DQ_OK) {
        slot_table_publish(w->slot, w->table, w->claim_part, w->batch.jobs, w->batch.n);
        w->batch_part = w->claim_part;
        note_partition_claimed(w, &w->batch);
    }
    w->slot->claim_in_flight = 0;
    if (st != DQ_OK) {
        dq_claim_result_free(&w->batch);
        if (reply->type != REDIS_REPLY_ERROR)
            log_err("queue=%s: unexpected reply to claim", w->q->name);
        sleep_for(w, RETRY_AFTER_ERROR_MS);
        return;
    }
    observe_pause(w, proto_claim_paused(reply), w->batch.now_ms, w->claim_sent_us);
    learn_server_clock(w, w->batch.now_ms);
    start_batch(w);
}

/* The claim's jobs are in w->batch: run them, or sleep if there are none. */
static void start_batch(struct worker *w)
{
    /* Now when the sweep goes on (with N = 1: when the claim found more
     * due), else the soonest due time the sweep saw. */
    w->next_due_server = qparts_claim_now(&w->parts) ? w->batch.now_ms
                         : qparts_next_due(&w->parts);
    if (w->batch.n == 0) {
        dq_claim_result_free(&w->batch);
        if (signals_stop_requested())
            event_base_loopbreak(w->base);
        else
            sleep_until_due(w, take_next_due(w));
        return;
    }
    for (size_t i = 0; i < w->batch.n; i++)
        slot_add(&slot_type_entry(w->slot, w->batch.jobs[i].type)->counters.claimed, 1);
    /* The claim that brought them was the last sent (a claim ahead is sent
     * only once the batch before has run): their leases end lease_ms
     * after it left, or later. */
    w->lease_end_us = w->claim_sent_us + w->q->lease_ms * 1000;
    w->run_i = 0;
    w->nok = 0;
    /* w->reports, w->ok and w->held have room for q->batch jobs
     * (worker_setup): read_claim refuses a reply with more. */
    w->state = W_RUNNING;
    event_active(w->run_ev, EV_TIMEOUT, 0);
}

/* Send a claim; 0 when it is on its way. */
static int send_claim(struct worker *w)
{
    struct cmd cmd;
    cmd_init(&cmd);
    w->claim_part = qparts_next_claim(&w->parts);
    proto_claim_cmd(&cmd, qparts_keys(&w->parts, w->claim_part), w->q->batch, w->q->lease_ms,
                    w->owner);
    w->claim_sent_us = slots_now_us();
    /* Set before the claim can reach Redis: from then on its jobs may be
     * leased to this worker before it can list them. */
    w->slot->claim_in_flight = 1;
    int rc = rconn_send(w->cmd, &cmd, DQ_SCRIPT_CLAIM, on_claim, w);
    if (rc != 0)
        w->slot->claim_in_flight = 0;
    cmd_free(&cmd);
    return rc;
}

/* A paused worker's look at the state: pause_state's reply. */
static void on_pause_state(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    int64_t now_ms, since_ms;
    w->state = W_IDLE;
    if (!reply)
        return;                 /* connection lost: on_cmd_up looks again */
    if (proto_pause_reply(reply, &now_ms, &since_ms) != DQ_OK) {
        if (reply->type != REDIS_REPLY_ERROR)
            log_err("queue=%s: unexpected reply to pause_state", w->q->name);
        sleep_for(w, RETRY_AFTER_ERROR_MS);
        return;
    }
    w->pause_recheck = 0;
    observe_pause(w, since_ms >= 0, now_ms, w->poll_sent_us);
    if (w->pause.paused && !signals_stop_requested()) {
        slot_claims_ok(w->slot);    /* none are made: none fail */
        sleep_until_due(w, -1);
    } else {
        drive(w);
    }
}

/* Send pause_state; 0 when it is on its way. */
static int send_pause_poll(struct worker *w)
{
    struct cmd cmd;
    cmd_init(&cmd);
    proto_pause_cmd(&cmd, qparts_keys(&w->parts, 0), DQ_SCRIPT_PAUSE_STATE);
    w->poll_sent_us = slots_now_us();
    int rc = rconn_send(w->cmd, &cmd, DQ_SCRIPT_PAUSE_STATE, on_pause_state, w);
    cmd_free(&cmd);
    return rc;
}

/* Claim when idle (paused: look at the state instead); stop when asked
 * and nothing is in hand. */
static void drive(struct worker *w)
{
    if (w->state != W_IDLE)
        return;
    if (signals_stop_requested()) {
        event_base_loopbreak(w->base);
        return;
    }
    if (w->pause.paused) {
        if (send_pause_poll(w) == 0)
            w->state = W_POLLING;   /* else not up: on_cmd_up polls */
        return;
    }
    if (send_claim(w) == 0)
        w->state = W_CLAIMING;
    else
        slot_claims_failed(w->slot, "not connected to Redis");
}

static void claim_ahead(struct worker *w)
{
    if (w->ahead == AHEAD_NONE && send_claim(w) == 0)
        w->ahead = AHEAD_SENT;
}

static void on_cmd_up(struct rconn *rc, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    w->slot->ready = 1;
    if (w->state == W_REPORTING)
        send_reports(w);
    else if (w->state == W_RENEWING) {
        send_reports(w);
        send_renewal(w);
    } else if (w->state == W_SLEEPING || w->state == W_IDLE) {
        evtimer_del(w->wake_timer);
        w->state = W_IDLE;
        drive(w);
    }
}

/* The subscription is (re)made.  Wake messages published while it was down
 * are lost, so look again: a sleeping worker claims now (learning the head
 * it should sleep towards), a busy one after its batch. */
static void on_sub_up(struct rconn *rc, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    if (w->state == W_SLEEPING) {
        evtimer_del(w->wake_timer);
        w->state = W_IDLE;
        drive(w);
    } else {
        w->woken_due = 0;
        w->pause_recheck = 1;
    }
}

/* The supervisor is gone: say so once; and when its bound is about to end
 * the process (signals.h) and Redis still has not taken the reports, leave
 * the loop so that the worker exits by itself.  What was not reported is
 * left to the leases: the jobs run again once they expire. */
static void check_orphaned(struct worker *w)
{
    if (!signals_parent_gone())
        return;
    if (!w->orphaned) {
        w->orphaned = 1;
        log_warn("the supervisor is gone: finishing the job in hand, reporting, and "
                 "exiting within %lld ms", (long long)signals_orphan_ms_left());
    }
    int64_t left = signals_orphan_ms_left();
    if (left < 0 || left > ORPHAN_MARGIN_MS)
        return;
    size_t unconfirmed = 0;
    for (size_t i = 0; i < w->nreports; i++)
        unconfirmed += !w->reports[i].done;
    log_warn("queue=%s: exiting with %zu report%s not confirmed by Redis; the leases give "
             "their jobs back", w->q->name, unconfirmed, unconfirmed == 1 ? "" : "s");
    event_base_loopbreak(w->base);
}

/* Signals only set a flag (signals.c); this timer acts on it, since a stop
 * must also be seen while the loop sleeps. */
static void on_stop_poll(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    check_orphaned(w);
    if (!signals_stop_requested() || w->stopping)
        return;
    w->stopping = 1;
    log_info("stopping");
    if (w->state == W_SLEEPING || w->state == W_IDLE)
        event_base_loopbreak(w->base);
}

/* ---- set-up ------------------------------------------------------------- */

/* Every partition's wake channel: a job due sooner in any partition may
 * be this worker's to steal. */
static int subscribe_wake(struct worker *w)
{
    const char **ch = calloc(w->parts.n, sizeof *ch);
    if (!ch)
        return -1;
    for (unsigned i = 0; i < w->parts.n; i++)
        ch[i] = qparts_keys(&w->parts, i)->wake;
    int rc = rconn_subscribe_many(w->sub, ch, w->parts.n, on_wake_message, w);
    free(ch);
    return rc;
}

static int worker_setup(struct worker *w)
{
    char err[800];
    if (handlers_open(&w->handlers, w->dc, err, sizeof err) < 0) {
        log_err("%s", err);
        return DAEMON_EXIT_CONFIG;
    }
    /* Precise timers (timerfd) rather than epoll's whole milliseconds: a
     * worker's wake-up is what sets a job's lateness. */
    struct event_config *cfg = event_config_new();
    if (cfg)
        event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
    w->base = cfg ? event_base_new_with_config(cfg) : NULL;
    if (cfg)
        event_config_free(cfg);
    if (!w->base)
        return DAEMON_EXIT_SOFTWARE;
    if (qparts_init(&w->parts, &w->dc->redis, w->q->name, (unsigned)w->q->partitions,
                    w->rank, (unsigned)w->q->workers) < 0)
        return DAEMON_EXIT_SOFTWARE;
    struct rconn_events cmd_ev = { on_cmd_up, NULL, w };
    w->cmd = rconn_from_conf(w->base, &w->dc->redis, "cmd", &cmd_ev);
    struct rconn_events sub_ev = { on_sub_up, NULL, w };
    w->sub = rconn_from_conf(w->base, &w->dc->redis, "sub", &sub_ev);
    w->wake_timer = evtimer_new(w->base, on_wake_timer, w);
    w->run_ev = event_new(w->base, -1, 0, on_run, w);
    w->stop_poll = event_new(w->base, -1, EV_PERSIST, on_stop_poll, w);
    /* Sized by the queue's batch, the most a claim returns (read_claim),
     * once: running a batch allocates none of them. */
    w->reports = calloc(MAX_REPORTS(w->q->batch), sizeof *w->reports);
    w->ok = calloc((size_t)w->q->batch, sizeof *w->ok);
    w->held = calloc((size_t)w->q->batch, sizeof *w->held);
    cmd_init(&w->renew);
    if (!w->cmd || !w->sub || !w->wake_timer || !w->run_ev || !w->stop_poll || !w->reports
        || !w->ok || !w->held)
        return DAEMON_EXIT_SOFTWARE;
    rconn_count_reconnects(w->cmd, &w->slot->redis_reconnects);
    rconn_count_reconnects(w->sub, &w->slot->redis_reconnects);
    if (subscribe_wake(w) < 0)
        return DAEMON_EXIT_SOFTWARE;
    struct timeval poll = { 0, STOP_POLL_MS * 1000 };
    evtimer_add(w->stop_poll, &poll);
    return DAEMON_EXIT_OK;
}

static void worker_teardown(struct worker *w)
{
    rconn_free(w->cmd);
    rconn_free(w->sub);
    if (w->wake_timer)
        event_free(w->wake_timer);
    if (w->run_ev)
        event_free(w->run_ev);
    if (w->stop_poll)
        event_free(w->stop_poll);
    if (w->base)
        event_base_free(w->base);
    free_reports(w);
    free(w->reports);
    free(w->ok);
    free(w->held);
    cmd_free(&w->renew);
    dq_claim_result_free(&w->batch);
    dq_claim_result_free(&w->next);
    handlers_close(&w->handlers);
    qparts_free(&w->parts);
}

int worker_main(const struct daemon_conf *dc, const struct queue_conf *q, unsigned rank,
                struct worker_slot *slot, const char *owner)
{
    struct worker w = { .dc = dc, .q = q, .rank = rank, .slot = slot, .owner = owner,
                        .next_due_server = -1, .woken_due = -1 };
    int rc = worker_setup(&w);
    if (rc == DAEMON_EXIT_OK) {
        log_debug("claiming from queue %s", q->name);
        rconn_start(w.sub);
        rconn_start(w.cmd);
        event_base_dispatch(w.base);
        rc = w.exit_code;
    }
    worker_teardown(&w);
    return rc;
}
