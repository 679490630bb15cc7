/*
 * Running a claimed batch: each job through its type's handler while its
 * lease outlasts the handler's timeout, looking at messages (a pause)
 * between jobs, then handing the outcomes to the reports.
 */
#include <stdio.h>

#include "daemon/log.h"
#include "daemon/signals.h"
#include "daemon/worker/worker_int.h"

/* Between the jobs of a batch, a worker looks at its messages (a pause)
 * whenever this long has passed since it last did: at most one job
 * starts after a pause message has reached a worker, unless the jobs since
 * its last look took less than this together. */
#define RUN_LOOK_US 1000
/* A job starts only while its lease outlasts its handler's timeout by this
 * much: the supervisor's tick (50 ms) may pass before it kills an overrun,
 * and the kill and the failure it sends take a few more.  So a handler can
 * never still be running when its lease expires and the job is claimed
 * again.  (The configuration asks for leases 1 s longer than any timeout,
 * so a freshly claimed job always has this much.) */
#define START_MARGIN_MS 500

/* Job i, run as `sj`, was cancelled while it ran (cancel_board.h): it
 * ended in Redis then, so whatever its handler answered, nothing is
 * reported; an ack or fail would be refused as stale anyway. */
static void job_cancelled(struct worker *w, size_t i, const struct slot_job *sj)
{
    slot_entry_set(w->slot, w->table, i, SE_DONE);
    slot_set_job(w->slot, NULL);
    slot_add(&w->slot->jobs_done, 1);
    log_info("job cancelled while running: queue=%s id=%s type=%s attempt=%d; "
             "its handler returned %lldms after it started", w->q->name, sj->id, sj->type,
             sj->attempt, (long long)(slots_now_ms() - sj->started_ms));
}

/* Job i of the batch was cancelled before it started (cancel_board.h):
 * it ended in Redis, so it is neither run nor reported. */
static void skip_cancelled(struct worker *w, size_t i)
{
    const dq_job *job = &w->batch.jobs[i];
    slot_entry_set(w->slot, w->table, i, SE_DONE);
    log_info("job cancelled before it started: queue=%s id=%s type=%s attempt=%d; "
             "not run", w->q->name, job->id, job->type, job->attempt);
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
        worker_report_failure(w, i, DQ_FAIL_DEAD, -1, job->last_error);
        return;
    }
    if (!e) {
        char why[200];
        snprintf(why, sizeof why, "no handler for type '%s'", job->type);
        worker_report_failure(w, i, DQ_FAIL_DEAD, -1, why);
        return;
    }
    struct slot_job sj = { .fence = job->fence, .attempt = job->attempt,
                           .started_ms = slots_now_ms(), .timeout_ms = e->conf->timeout_ms,
                           .cancel_grace_ms = e->conf->cancel_grace_ms,
                           .part = w->batch_part };
    snprintf(sj.id, sizeof sj.id, "%s", job->id);
    snprintf(sj.type, sizeof sj.type, "%s", job->type);
    snprintf(sj.queue, sizeof sj.queue, "%s", w->q->name);
    slot_entry_set(w->slot, w->table, i, SE_RUNNING);
    slot_set_job(w->slot, &sj);
    dq_handler_job hj = {
        .queue = w->q->name, .id = job->id, .type = job->type,
        .payload = job->payload, .payload_len = job->payload_len,
        .attempt = job->attempt, .max_attempts = worker_attempts_allowed(w, job),
        .due_ms = job->due_ms, .created_ms = job->created_ms,
        .last_error = job->last_error, .fence = job->fence,
    };
    dq_handler_outcome out;
    int64_t late_us = (server_now(w) - job->due_ms) * 1000;
    slot_hist_observe(&st->lateness, late_us);
    if (job->priority >= 0 && job->priority < DQ_PRIORITY_LEVELS)
        slot_hist_observe(&w->slot->lateness_by_priority[job->priority], late_us);
    int64_t start_us = slots_now_us();
    dq_handler_result res = handler_run(&e->lh, &hj, &out);
    slot_hist_observe(&st->duration, slots_now_us() - start_us);
    if (handlers_job_cancelled(&hj)) {
        job_cancelled(w, i, &sj);
        return;
    }
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
    worker_report_failure(w, i, res == DQ_HANDLER_RETRY ? DQ_FAIL_RETRY : DQ_FAIL_DEAD,
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

/* Whether the run loop should hand control to the event loop before the
 * next job, so that a pause message waiting there is read first
 * (RUN_LOOK_US); if so, worker_on_run is scheduled to go on after it. */
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
 * renewal (worker_start_renewal); the loop then resumes here, as it does after
 * looking at its messages (look_at_messages). */
void worker_on_run(evutil_socket_t fd, short what, void *arg)
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
        if (handlers_cancel_asked(job->fence, job->id)) {
            skip_cancelled(w, w->run_i);
            continue;
        }
        struct handler_entry *e = job->type[0] ? handlers_find(&w->handlers, job->type) : NULL;
        if (!lease_covers(w, e)) {
            worker_start_renewal(w);
            return;
        }
        run_job(w, w->run_i, e);
    }
    worker_report_successes(w);
    if (w->run_i < b->n) {
        log_info("%s: giving back %zu claimed job%s not started",
                 w->pause.paused ? "paused" : "stopping", b->n - w->run_i,
                 b->n - w->run_i == 1 ? "" : "s");
        proto_release_cmd(&worker_add_report(w, DQ_SCRIPT_RELEASE)->cmd, batch_keys(w),
                          &b->jobs[w->run_i], b->n - w->run_i);
    }
    w->state = W_REPORTING;
    size_t unsent = 0;
    for (size_t i = 0; i < w->nreports; i++)
        unsent += !w->reports[i].done;
    if (unsent == 0) {
        worker_finish_batch(w);
        return;
    }
    worker_send_reports(w);
    if (w->awaiting == unsent && qparts_claim_now(&w->parts) && !signals_stop_requested()
        && !w->pause.paused)
        worker_claim_ahead(w);
}

/* The claim's jobs are in w->batch: run them, or sleep if there are none. */
void worker_start_batch(struct worker *w)
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
            worker_sleep_until_due(w, worker_take_next_due(w));
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
