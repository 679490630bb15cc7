/*
 * The inside of a worker process, shared by its files (worker.h is its
 * outside): one worker's state, and how its parts call each other.
 *
 *   worker.c         set-up, teardown, the connections coming up, stopping
 *   worker_claim.c   claims (and the claim sent ahead), pause polls
 *   worker_run.c     running a claimed batch through the handlers
 *   worker_renew.c   renewing the leases of a long batch's jobs not started
 *   worker_report.c  acks, fails and releases, kept until Redis confirms them
 *   worker_sleep.c   sleeping until the next due job; wake and pause messages
 *
 * Everything runs on the worker's one event loop: no locking.  Only the
 * worker's own files include this.
 */
#ifndef DQ_WORKER_INT_H
#define DQ_WORKER_INT_H

#include <event2/event.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/dconfig.h"
#include "daemon/qparts.h"
#include "daemon/slots.h"
#include "daemon/worker/handlers.h"
#include "daemon/worker/wake.h"
#include "lib/proto.h"
#include "redis/rconn.h"

#define RETRY_AFTER_ERROR_MS 1000
/* A partition whose master is out of reach is asked again after this. */
#define UNREACHABLE_RETRY_MS 1000

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

/* The Redis server's clock as this worker estimates it, in µs. */
static inline int64_t server_now_us(const struct worker *w)
{
    return slots_now_us() + w->server_offset_us;
}

static inline int64_t server_now(const struct worker *w)
{
    return server_now_us(w) / 1000;
}

/* The keys of the batch's partition: its reports go there, since every
 * job of a claim comes from the partition claimed. */
static inline const struct queue_keys *batch_keys(const struct worker *w)
{
    return qparts_keys(&w->parts, w->batch_part);
}

/* ---- worker_sleep.c ---- */

void worker_sleep_for(struct worker *w, int64_t ms);
void worker_on_wake_timer(evutil_socket_t fd, short what, void *arg);
int64_t worker_take_next_due(struct worker *w);
void worker_sleep_until_due(struct worker *w, int64_t due);
void worker_observe_pause(struct worker *w, bool paused, int64_t server_ms, int64_t sent_us);
void worker_on_wake_message(struct rconn *rc, const char *channel, const char *payload,
                            size_t len, void *arg);

/* ---- worker_report.c ---- */

struct report *worker_add_report(struct worker *w, int script);
void worker_free_reports(struct worker *w);
void worker_finish_batch(struct worker *w);
bool worker_abandon_unreachable(struct worker *w);
void worker_give_up(struct worker *w, const char *what);
void worker_send_reports(struct worker *w);
int worker_attempts_allowed(const struct worker *w, const dq_job *job);
void worker_report_failure(struct worker *w, size_t i, dq_fail_mode mode,
                           int64_t delay_ms, const char *error);
void worker_report_successes(struct worker *w);

/* ---- worker_run.c ---- */

void worker_on_run(evutil_socket_t fd, short what, void *arg);
void worker_start_batch(struct worker *w);

/* ---- worker_renew.c ---- */

void worker_start_renewal(struct worker *w);
void worker_send_renewal(struct worker *w);
void worker_resume_after_renewal(struct worker *w);

/* ---- worker_claim.c ---- */

void worker_drive(struct worker *w);
void worker_claim_ahead(struct worker *w);

#endif
