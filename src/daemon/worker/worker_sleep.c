/*
 * A worker's sleep until the next due job, cut short by a producer's wake
 * message; and the pause state, as claims, polls and messages tell it.
 */
#include <string.h>

#include "daemon/log.h"
#include "daemon/worker/worker_int.h"

/* Longest sleep without a claim: bounds the cost of a lost wake message,
 * and keeps an idle worker at one command per IDLE_CAP_MS. */
#define IDLE_CAP_MS 60000
/* Wake this long after the estimated due instant: waking before it costs
 * an empty claim and a second sleep, which is later still. */
#define WAKE_MARGIN_US 250
/* A paused worker sends no claim; it learns of the resume from the wake
 * channel, and reads the state after its subscription is made again (a
 * message may have been lost meanwhile).  This slow poll of the state
 * bounds what any other loss could cost. */
#define PAUSE_POLL_MS 5000

static void sleep_for_us(struct worker *w, int64_t us)
{
    if (us < 0 || us > (int64_t)IDLE_CAP_MS * 1000)
        us = (int64_t)IDLE_CAP_MS * 1000;
    w->state = W_SLEEPING;
    w->sleep_until_us = slots_now_us() + us;
    struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };
    if (evtimer_add(w->wake_timer, &tv) < 0)
        log_err("cannot arm the wake timer: the next claim waits for a wake message");
}

void worker_sleep_for(struct worker *w, int64_t ms)
{
    sleep_for_us(w, ms < 0 ? -1 : ms * 1000);
}

void worker_on_wake_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    if (w->state == W_SLEEPING)
        w->state = W_IDLE;
    worker_drive(w);
}

/* The server ms to sleep towards after a claim or a batch: the next due
 * job the claim reported, or sooner if a wake message said so meanwhile. */
int64_t worker_take_next_due(struct worker *w)
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
void worker_sleep_until_due(struct worker *w, int64_t due)
{
    int64_t us = due * 1000 - server_now_us(w) + WAKE_MARGIN_US;
    if (w->pause.paused && w->pause_recheck)
        worker_drive(w);
    else if (w->pause.paused)
        worker_sleep_for(w, PAUSE_POLL_MS);
    else if (due < 0)
        worker_sleep_for(w, -1);
    else if (us > 0)
        sleep_for_us(w, us);
    else
        worker_drive(w);
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
void worker_observe_pause(struct worker *w, bool paused, int64_t server_ms, int64_t sent_us)
{
    bool was = w->pause.paused;
    pause_view_observe(&w->pause, paused, server_ms, sent_us);
    log_pause_change(w, was);
}

/* The queue was paused or resumed (wake.h).  A sleeping worker sleeps
 * paused, or claims at once; a busy one starts no further job of its batch
 * (worker_on_run), or claims when it is done. */
static void on_pause_message(struct worker *w, bool paused, int64_t ms)
{
    bool was = w->pause.paused;
    pause_view_hear(&w->pause, paused, ms, slots_now_us());
    log_pause_change(w, was);
    if (!paused)
        qparts_forget(&w->parts);   /* no wake was sent while it was paused */
    if (w->state != W_SLEEPING) {
        if (!paused)
            w->woken_due = 0;   /* a claim in flight may say paused still */
        return;
    }
    evtimer_del(w->wake_timer);
    w->state = W_IDLE;
    if (paused)
        worker_sleep_for(w, PAUSE_POLL_MS);
    else
        worker_drive(w);
}

/* Tell the sweep (qparts.h) which partition the wake came from; one not
 * recognised makes it ask them all. */
static void note_woken_partition(struct worker *w, const char *channel, int64_t due)
{
    for (unsigned i = 0; i < w->parts.n; i++)
        if (strcmp(qparts_keys(&w->parts, i)->wake, channel) == 0) {
            qparts_woken(&w->parts, i, due);
            return;
        }
    qparts_forget(&w->parts);
}

/* A producer made a job due sooner than the head we sleep towards: wake at
 * its due time instead, on our own precise timer.  A worker that is busy
 * (claiming, running, reporting) keeps the time for when it is done: the
 * claim it made may predate the job, and the message comes only once.
 * A paused worker has no use for it: it claims when it is resumed. */
void worker_on_wake_message(struct rconn *rc, const char *channel, const char *payload,
                            size_t len, void *arg)
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
    note_woken_partition(w, channel, due);
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
