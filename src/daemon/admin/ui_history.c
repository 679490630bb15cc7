/*
 * ui_history: per-queue rings of one-second samples (ui_history.h).
 *
 * Time is counted in ticks, one per sampling round, shared by every queue
 * so that their rings line up: a call more than half a second after the
 * round's first call starts a new round, and a round that comes late (the
 * admin process was busy or restarting, or the dashboard was off) skips as many seconds as
 * went by.  A queue keeps the totals of its last reading (its base); a
 * sample is the difference to the new reading, written at the round's
 * tick.  The lateness of each of a queue's last 60 seconds is kept as a
 * histogram, for the minute's quantiles; the sum of every queue (the
 * overview's charts) keeps its histograms for the whole hour, so its
 * quantiles are true quantiles of all the jobs, not an average of the
 * queues'.
 *
 * The whole history is one fixed block in shared memory (no pointer but
 * into the block itself), made by the supervisor before the first fork:
 * the admin process writes it, and the next admin process (after a
 * reload, or a crash) goes on from where it was.  Memory: about 60 KB a
 * queue in use, 280 KB for the sum; the block is reserved lazily.
 */
#include "daemon/admin/ui_history.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "daemon/dconfig.h"

#define ROUND_MS 500            /* calls closer than this are one round */
#define MINUTE 60
#define HBUCKETS (SLOT_HIST_BOUNDS + 1)
/* Queues kept at once: those of the configuration, and those a reload
 * removed, for the hour they stay; beyond, the stalest is reused. */
#define QUEUES (2 * DCONFIG_MAX_QUEUES)

/* The lateness histogram of one second (a second holds < 2^32 jobs). */
struct hist32 {
    uint32_t counts[HBUCKETS];
};

struct series {
    int used;
    char queue[DQ_QUEUE_MAX + 1]; /* "": the sum of every queue */
    int64_t first_tick;         /* the tick of the first reading */
    int64_t tick;               /* the newest tick written */
    struct ui_totals base;      /* the last reading (queues only) */
    struct ui_sample samples[UI_HISTORY_SECONDS];
    struct hist32 *hists;       /* nhists, at tick % nhists (in the block) */
    size_t nhists;              /* MINUTE, or UI_HISTORY_SECONDS for the sum */
};

struct ui_history {
    int64_t tick;               /* the current round; 0 before the first */
    int64_t tick_ms;            /* when it began (monotonic: one clock for
                                   every process) */
    struct series all;          /* unused before the first reading */
    struct series queues[QUEUES];
    struct hist32 all_hists[UI_HISTORY_SECONDS];
    struct hist32 queue_hists[QUEUES][MINUTE];
};

/* ---- quantiles ------------------------------------------------------------ */

int64_t ui_hist_quantile(const struct slot_hist *hist, double q)
{
    static const int64_t bounds[SLOT_HIST_BOUNDS] = SLOT_HIST_BOUNDS_US;
    uint64_t total = 0;
    for (int b = 0; b < HBUCKETS; b++)
        total += hist->counts[b];
    if (total == 0)
        return -1;
    q = q < 0 ? 0 : q > 1 ? 1 : q;
    double rank = q * (double)total, below = 0;
    for (int b = 0; b < SLOT_HIST_BOUNDS; b++) {
        double n = (double)hist->counts[b];
        if (n > 0 && below + n >= rank) {
            double lo = b ? (double)bounds[b - 1] : 0, hi = (double)bounds[b];
            return (int64_t)(lo + (hi - lo) * (rank - below) / n);
        }
        below += n;
    }
    /* Above every bound: no upper edge to interpolate to, so the last
     * bound (as Prometheus's histogram_quantile answers). */
    return bounds[SLOT_HIST_BOUNDS - 1];
}

static int32_t quantile32(const struct hist32 *h, double q)
{
    struct slot_hist wide = { 0 };
    for (int b = 0; b < HBUCKETS; b++)
        wide.counts[b] = h->counts[b];
    int64_t us = ui_hist_quantile(&wide, q);
    return us > INT32_MAX ? INT32_MAX : (int32_t)us;
}

/* ---- one series ------------------------------------------------------------- */

/* Start series `s` (its histograms `hists`, `nhists` of them) at `tick`. */
static void series_init(struct series *s, const char *queue, int64_t tick,
                        struct hist32 *hists, size_t nhists)
{
    memset(s, 0, sizeof *s);
    memset(hists, 0, nhists * sizeof *hists);
    snprintf(s->queue, sizeof s->queue, "%s", queue ? queue : "");
    s->hists = hists;
    s->nhists = nhists;
    s->first_tick = s->tick = tick;
    for (size_t i = 0; i < UI_HISTORY_SECONDS; i++)
        s->samples[i].p50_us = s->samples[i].p99_us = -1;
    s->used = 1;
}

/* Move `s` on to `tick`: the seconds in between (at most a ring's worth)
 * had nothing. */
static void series_advance(struct series *s, int64_t tick)
{
    int64_t from = s->tick + 1;
    if (tick - from >= UI_HISTORY_SECONDS)
        from = tick - UI_HISTORY_SECONDS + 1;
    for (int64_t t = from; t <= tick; t++) {
        s->samples[t % UI_HISTORY_SECONDS] = (struct ui_sample){ 0, 0, -1, -1 };
        if (tick - t < (int64_t)s->nhists)
            memset(&s->hists[t % (int64_t)s->nhists], 0, sizeof s->hists[0]);
    }
    if (tick > s->tick)
        s->tick = tick;
}

/* Add a second's figures to `s`'s newest one (s->tick). */
static void series_add(struct series *s, uint32_t done, uint32_t failed,
                       const struct hist32 *late)
{
    struct ui_sample *x = &s->samples[s->tick % UI_HISTORY_SECONDS];
    struct hist32 *h = &s->hists[s->tick % (int64_t)s->nhists];
    x->done += done;
    x->failed += failed;
    for (int b = 0; b < HBUCKETS; b++)
        h->counts[b] += late->counts[b];
    x->p50_us = quantile32(h, 0.50);
    x->p99_us = quantile32(h, 0.99);
}

/* The sample of tick `t`, or NULL when `s` has none (before its first
 * reading, after its newest, or older than the ring). */
static const struct ui_sample *series_at(const struct series *s, int64_t t)
{
    if (t <= s->first_tick || t > s->tick || s->tick - t >= UI_HISTORY_SECONDS)
        return NULL;
    return &s->samples[t % UI_HISTORY_SECONDS];
}

static const struct hist32 *series_hist_at(const struct series *s, int64_t t)
{
    if (!series_at(s, t) || s->tick - t >= (int64_t)s->nhists)
        return NULL;
    return &s->hists[t % (int64_t)s->nhists];
}

/* ---- the history ------------------------------------------------------------- */

struct ui_history *ui_history_new(void)
{
    void *p = mmap(NULL, sizeof(struct ui_history), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ui_history_free(struct ui_history *h)
{
    if (h)
        munmap(h, sizeof *h);
}

void ui_history_clear(struct ui_history *h)
{
    if (!h->tick)
        return;
    h->tick = h->tick_ms = 0;
    h->all.used = 0;
    for (size_t i = 0; i < QUEUES; i++)
        h->queues[i].used = 0;
}

static struct series *find_queue(const struct ui_history *h, const char *queue)
{
    for (size_t i = 0; i < QUEUES; i++)
        if (h->queues[i].used && strcmp(h->queues[i].queue, queue) == 0)
            return (struct series *)&h->queues[i];
    return NULL;
}

/* Begin a new round when `now_ms` is past the current one; forget the
 * queues that have had no reading for an hour (a reload removed them). */
static void next_round(struct ui_history *h, int64_t now_ms)
{
    if (h->tick && now_ms - h->tick_ms < ROUND_MS)
        return;
    int64_t steps = h->tick ? (now_ms - h->tick_ms + 500) / 1000 : 1;
    h->tick += steps < 1 ? 1 : steps;
    h->tick_ms = now_ms;
    for (size_t i = 0; i < QUEUES; i++)
        if (h->queues[i].used && h->tick - h->queues[i].tick > UI_HISTORY_SECONDS)
            h->queues[i].used = 0;
}

/* A new queue's series, its base `t`: a free one, else the stalest. */
static void add_queue(struct ui_history *h, const char *queue, const struct ui_totals *t)
{
    size_t k = 0;
    for (size_t i = 0; i < QUEUES; i++) {
        if (!h->queues[i].used) {
            k = i;
            break;
        }
        if (h->queues[i].tick < h->queues[k].tick)
            k = i;
    }
    series_init(&h->queues[k], queue, h->tick, h->queue_hists[k], MINUTE);
    h->queues[k].base = *t;
}

/* b - a, or 0 when b is smaller (a reading must never go back; if one
 * did, the next delta starts from it). */
static uint32_t delta(uint64_t a, uint64_t b)
{
    uint64_t d = b > a ? b - a : 0;
    return d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

void ui_history_sample(struct ui_history *h, const char *queue, int64_t now_ms,
                       const struct ui_totals *t)
{
    next_round(h, now_ms);
    if (!h->all.used)
        series_init(&h->all, NULL, h->tick, h->all_hists, UI_HISTORY_SECONDS);
    struct series *s = find_queue(h, queue);
    if (!s) {
        add_queue(h, queue, t);
        return;
    }
    const struct ui_totals *b = &s->base;
    uint32_t ok = delta(b->succeeded, t->succeeded);
    uint32_t failed = delta(b->retried, t->retried) + delta(b->dead, t->dead);
    struct hist32 late;
    for (int i = 0; i < HBUCKETS; i++)
        late.counts[i] = delta(b->lateness.counts[i], t->lateness.counts[i]);
    s->base = *t;
    series_advance(s, h->tick);
    series_add(s, ok + failed, failed, &late);
    series_advance(&h->all, h->tick);
    series_add(&h->all, ok + failed, failed, &late);
}

static const struct series *series_of(const struct ui_history *h, const char *queue)
{
    return queue ? find_queue(h, queue) : h->all.used ? &h->all : NULL;
}

size_t ui_history_series(const struct ui_history *h, const char *queue,
                         struct ui_sample *out, size_t n)
{
    if (n > UI_HISTORY_SECONDS)
        n = UI_HISTORY_SECONDS;
    const struct series *s = series_of(h, queue);
    size_t real = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t t = h->tick - (int64_t)(n - 1 - i);
        const struct ui_sample *x = s ? series_at(s, t) : NULL;
        out[i] = x ? *x : (struct ui_sample){ 0, 0, -1, -1 };
        /* A second since the first reading is real even without one of
         * its own (the queue was gone for a while): nothing ran. */
        real += s && t > s->first_tick;
    }
    return real;
}

void ui_history_minute(const struct ui_history *h, const char *queue,
                       double *jobs_per_s, int64_t *p50_us, int64_t *p99_us)
{
    const struct series *s = series_of(h, queue);
    struct slot_hist sum = { 0 };
    uint64_t done = 0;
    int64_t seconds = 0;
    for (int64_t t = h->tick; s && t > h->tick - MINUTE && t > s->first_tick; t--) {
        seconds++;
        const struct ui_sample *x = series_at(s, t);
        const struct hist32 *l = series_hist_at(s, t);
        if (!x || !l)
            continue;
        done += x->done;
        for (int b = 0; b < HBUCKETS; b++)
            sum.counts[b] += l->counts[b];
    }
    *jobs_per_s = seconds ? (double)done / (double)seconds : 0.0;
    *p50_us = ui_hist_quantile(&sum, 0.50);
    *p99_us = ui_hist_quantile(&sum, 0.99);
}
