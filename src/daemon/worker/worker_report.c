/*
 * A batch's reports (one ack for its successes, a fail per failure, one
 * release for the jobs not started), kept until Redis confirmed each, sent
 * again after a reconnect or an error; and what follows a settled batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/exitcodes.h"
#include "daemon/log.h"
#include "daemon/signals.h"
#include "daemon/worker/worker_int.h"

struct report *worker_add_report(struct worker *w, int script)
{
    struct report *r = &w->reports[w->nreports++];
    memset(r, 0, sizeof *r);
    r->w = w;
    cmd_init(&r->cmd);
    r->script = script;
    return r;
}

void worker_free_reports(struct worker *w)
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

/* The batch is settled: take the claim sent ahead, or sleep until the next
 * due job, or claim again. */
void worker_finish_batch(struct worker *w)
{
    worker_free_reports(w);
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
        worker_start_batch(w);
        return;
    }
    /* A claim sent ahead that failed is tried again now, not after a
     * sleep: /healthz would report claims failing all that while. */
    if (signals_stop_requested() || w->slot->claims.failing_since_ms)
        worker_drive(w);
    else
        worker_sleep_until_due(w, worker_take_next_due(w));
}

static void on_resend_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    worker_send_reports(arg);
}

/*
 * The batch's reports (or, mid-batch, its renewal) cannot reach its
 * partition (over a cluster, its master is down while the others answer)
 * and its jobs' leases have run out: whatever those reports would record,
 * the reaper takes over once that master answers (a job finished here may
 * then run again, as after a worker's death; a job not started runs
 * then, its expired lease counted as an attempt, as for any lease the
 * reaper takes back).  Rather than hold the worker, and so the other
 * partitions of a queue with one worker, until the master comes back, the
 * reports are given up, the jobs not started are left to the reaper, and
 * the worker goes on.  Only once nothing is in flight (no report, no renewal), so no
 * reply comes for them later.
 */
bool worker_abandon_unreachable(struct worker *w)
{
    bool renewing = w->state == W_RENEWING;
    if ((w->state != W_REPORTING && !renewing) || w->awaiting > 0
        || (renewing && w->renew_sent) || slots_now_us() <= w->lease_end_us
        || rconn_key_is_up(w->cmd, batch_keys(w)->key[0]))
        return false;
    size_t left = 0;
    for (size_t i = 0; i < w->nreports; i++)
        left += !w->reports[i].done;
    size_t unstarted = renewing ? w->batch.n - w->run_i : 0;
    log_warn("queue=%s: partition %u still out of reach past its batch's leases: %zu "
             "report%s not recorded, %zu job%s not started; the reaper returns those jobs "
             "once it answers (finished ones may run again)", w->q->name, w->batch_part,
             left, left == 1 ? "" : "s", unstarted, unstarted == 1 ? "" : "s");
    worker_finish_batch(w);
    return true;
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
            if (rconn_is_up(w->cmd) && !worker_abandon_unreachable(w)) {
                struct timeval tv = { RETRY_AFTER_ERROR_MS / 1000, 0 };
                event_base_once(w->base, -1, EV_TIMEOUT, on_resend_timer, w, &tv);
            }
            return;
        }
    if (w->state == W_RENEWING)
        worker_resume_after_renewal(w);
    else
        worker_finish_batch(w);
}

/* A report or renewal that could not be built (out of memory) can never
 * be sent: stop the worker rather than hold its batch for ever.  The
 * supervisor then settles the slot table (acks what finished, applies the
 * failures, gives back the rest), so no job waits on this worker. */
void worker_give_up(struct worker *w, const char *what)
{
    log_err("queue=%s: out of memory building %s: stopping; the supervisor settles "
            "the batch", w->q->name, what);
    w->exit_code = DAEMON_EXIT_SOFTWARE;
    event_base_loopbreak(w->base);
}

void worker_send_reports(struct worker *w)
{
    if ((w->state != W_REPORTING && w->state != W_RENEWING) || w->awaiting > 0)
        return;
    int stuck = 0;
    for (size_t i = 0; i < w->nreports; i++) {
        struct report *r = &w->reports[i];
        if (r->done)
            continue;
        if (r->cmd.oom) {
            worker_give_up(w, "a report");
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

int worker_attempts_allowed(const struct worker *w, const dq_job *job)
{
    if (job->max_attempts > 0)
        return job->max_attempts;
    return dconfig_max_attempts(w->dc, w->q, job->type);
}

/* A failed job: its report, sent with the batch's, and its entry in the
 * slot table, so that the failure is applied even if this worker dies
 * before the report is. */
void worker_report_failure(struct worker *w, size_t i, dq_fail_mode mode,
                           int64_t delay_ms, const char *error)
{
    const dq_job *job = &w->batch.jobs[i];
    struct report *r = worker_add_report(w, DQ_SCRIPT_FAIL);
    dq_retry_policy policy = dconfig_retry_for(w->dc, w->q, job->type);
    snprintf(r->error, sizeof r->error, "%s", error);
    r->counts = slot_type_entry(w->slot, job->type);
    proto_fail_cmd(&r->cmd, batch_keys(w), job->id, job->fence, r->error, mode, delay_ms,
                   &policy, (uint32_t)random());
    snprintf(r->what, sizeof r->what, "job failed: queue=%s id=%s type=%s attempt=%d/%d error=%s",
             w->q->name, job->id, job->type, job->attempt, worker_attempts_allowed(w, job), error);
    slot_entry_fail(w->slot, w->table, i, mode == DQ_FAIL_DEAD ? SE_DEAD : SE_RETRY,
                    job->type, delay_ms, error);
}

/* The successes since the last report go out as one ack. */
void worker_report_successes(struct worker *w)
{
    if (w->nok == 0)
        return;
    proto_ack_cmd(&worker_add_report(w, DQ_SCRIPT_ACK)->cmd, batch_keys(w), w->ok, w->nok);
    w->nok = 0;
}
