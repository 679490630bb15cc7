#include "daemon/relay/relay.h"

#include <delayq/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/redis_conf.h"
#include "daemon/dconfig_sources.h"
#include "daemon/exitcodes.h"
#include "daemon/log.h"
#include "daemon/relay/relay_apply.h"
#include "daemon/relay/relay_defer.h"
#include "daemon/relay/relay_pg.h"
#include "daemon/signals.h"

#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000
#define SLICE_MS 100            /* waits are cut in slices: a stop is seen this soon */

struct relay {
    const struct daemon_conf *dc;
    const struct source_conf *sc;
    struct worker_slot *slot;
    struct relay_pg *pg;
    dq_client *redis;
    int leading;
    int said_leading;           /* "applying the rows" was logged since this
                                   relay last waited for another daemon's */
    int64_t backoff_ms;
    int64_t failing_since_ms;   /* monotonic; 0 while it works */
    struct relay_defer *defer;  /* a cluster: rows held while their
                                   partition's master is out of reach */
};

static void sleep_ms(int64_t ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* Sleep `ms` in slices; returns early at a stop. */
static void pause_ms(int64_t ms)
{
    for (int64_t left = ms; left > 0 && !signals_stop_requested(); left -= SLICE_MS)
        sleep_ms(left < SLICE_MS ? left : SLICE_MS);
}

/* Something failed: say so once (until it works again), publish it for
 * /healthz, and wait the backoff. */
static void failed(struct relay *rl, const char *why)
{
    if (!rl->failing_since_ms) {
        rl->failing_since_ms = slots_now_ms();
        log_warn("source %s: %s; rows wait in %s.%s, retrying (said once until it works)",
                 rl->sc->name, why, rl->sc->schema, rl->sc->table);
    }
    slot_claims_failed(rl->slot, why);
    rl->backoff_ms = rl->backoff_ms ? rl->backoff_ms * 2 : BACKOFF_FIRST_MS;
    if (rl->backoff_ms > BACKOFF_MAX_MS)
        rl->backoff_ms = BACKOFF_MAX_MS;
    pause_ms(rl->backoff_ms);
}

static void working(struct relay *rl)
{
    if (rl->failing_since_ms)
        log_info("source %s: working again after %.1f s", rl->sc->name,
                 (double)(slots_now_ms() - rl->failing_since_ms) / 1000.0);
    rl->failing_since_ms = 0;
    rl->backoff_ms = 0;
    slot_claims_ok(rl->slot);
}

/* The connections, made when missing; 0, or -1 after failed(). */
static int connect_both(struct relay *rl)
{
    char why[600];
    if (!relay_pg_connected(rl->pg)) {
        rl->leading = 0;
        __atomic_store_n(&rl->slot->relay_leader, 0, __ATOMIC_RELAXED);
        if (relay_pg_connect(rl->pg, why, sizeof why) < 0) {
            failed(rl, why);
            return -1;
        }
    }
    if (!rl->redis) {
        dq_options opt;
        redis_conf_to_options(&rl->dc->redis, &opt);
        char err[400];
        rl->redis = dq_connect(&opt, err, sizeof err, NULL);
        if (!rl->redis) {
            snprintf(why, sizeof why, "redis: %s", err);
            failed(rl, why);
            return -1;
        }
    }
    return 0;
}

/* Wait for a notification, or poll_interval; a stop ends it early. */
static void wait_rows(struct relay *rl)
{
    char why[600];
    for (int64_t left = rl->sc->poll_ms; left > 0 && !signals_stop_requested();
         left -= SLICE_MS) {
        int rc = relay_pg_wait(rl->pg, left < SLICE_MS ? left : SLICE_MS, why, sizeof why);
        if (rc != 0) {
            if (rc < 0)
                failed(rl, why);
            return;
        }
    }
}

/* Become the applying relay, or wait for the one that is; 1 when leading. */
static int lead(struct relay *rl)
{
    if (rl->leading)
        return 1;
    char why[600];
    int rc = relay_pg_lead(rl->pg, why, sizeof why);
    if (rc < 0) {
        failed(rl, why);
        return 0;
    }
    if (rc == 0) {              /* another daemon's relay applies the rows */
        working(rl);
        rl->said_leading = 0;
        pause_ms(rl->sc->poll_ms);
        return 0;
    }
    /* Leading is not working yet: a batch that fails again after a
     * reconnect is the same outage, said once.  What another relay held
     * meanwhile is its own: this one starts with nothing held. */
    rl->leading = 1;
    if (rl->defer)
        memset(rl->defer, 0, sizeof *rl->defer);
    __atomic_store_n(&rl->slot->relay_leader, 1, __ATOMIC_RELAXED);
    slot_add(&rl->slot->jobs_done, 1);     /* progress: a restart needs no backoff */
    if (!rl->said_leading)      /* not again at each reconnect of an outage */
        log_info("source %s: applying the rows of %s.%s (this relay holds the table's "
                 "lock)", rl->sc->name, rl->sc->schema, rl->sc->table);
    rl->said_leading = 1;
    return 1;
}

/* Log the batch's dead rows, and its adds found applied already; returns
 * how many rows are dead. */
static uint64_t log_dead(const struct relay *rl, const struct relay_batch *b)
{
    uint64_t dead = 0, replayed = 0;
    for (size_t i = 0; i < b->n; i++) {
        const struct relay_row *r = &b->rows[i];
        replayed += r->replayed;
        if (r->outcome != ROW_DEAD)
            continue;
        dead++;
        log_warn("source %s: row %lld (%s of job %s, queue %s) moved to %s_dead: %s",
                 rl->sc->name, (long long)r->id,
                 r->op == RELAY_ADD ? "add" : r->op == RELAY_CANCEL ? "cancel" : "replace",
                 *r->name ? r->name : r->job_id, r->queue, rl->sc->table, r->reason);
    }
    if (replayed)
        log_info("source %s: %llu add%s of this batch found %s job in Redis already (its "
                 "job waits, or finished within replay_window): left as %s", rl->sc->name,
                 (unsigned long long)replayed, replayed == 1 ? "" : "s",
                 replayed == 1 ? "its" : "their", replayed == 1 ? "it is" : "they are");
    return dead;
}

/* Say which partitions went out of reach in this batch (once per outage)
 * and how many of its rows are held; returns how many. */
static uint64_t log_held(const struct relay *rl, const struct relay_batch *b)
{
    uint64_t held = 0;
    for (size_t i = 0; i < b->n; i++) {
        const struct relay_row *r = &b->rows[i];
        held += r->outcome == ROW_HELD;
        if (r->outcome == ROW_HELD && r->newly_held)
            log_warn("source %s: partition %u of queue %s is out of reach (%s): its rows "
                     "wait in %s.%s, in order, and are tried again every few seconds; the "
                     "other partitions' rows go on", rl->sc->name, r->part, r->qname,
                     r->reason, rl->sc->schema, rl->sc->table);
    }
    if (held)
        log_debug("source %s: %llu row%s of this batch held for partitions out of reach",
                  rl->sc->name, (unsigned long long)held, held == 1 ? "" : "s");
    return held;
}

/* The partitions out of reach whose rows went through again. */
static void log_back(const struct relay *rl)
{
    struct relay_held_part p;
    while (rl->defer && relay_defer_next_back(rl->defer, &p))
        log_info("source %s: partition %u of queue %s answers again: its rows go on",
                 rl->sc->name, p.part, p.queue);
}

/* One batch: taken, applied, deleted.  Returns the rows it took (0 when
 * the table is empty), or -1 after failed(). */
static int relay_batch_once(struct relay *rl)
{
    char why[600];
    struct relay_batch b;
    if (rl->defer)
        relay_defer_retry_due(rl->defer, slots_now_ms());
    if (relay_pg_take(rl->pg, rl->sc->batch, relay_defer_ids(rl->defer), &b, why,
                      sizeof why) < 0) {
        failed(rl, why);
        return -1;
    }
    if (b.n == 0) {
        working(rl);
        return 0;
    }
    if (relay_apply(rl->redis, rl->dc, rl->sc, rl->defer, &b, why, sizeof why) < 0) {
        log_held(rl, &b);       /* the partitions it held stay held */
        relay_pg_abort(rl->pg, &b);
        failed(rl, why);
        return -1;
    }
    int n = (int)b.n;
    int64_t t0 = slots_now_ms();
    uint64_t dead = log_dead(rl, &b), held = log_held(rl, &b);
    if (relay_pg_finish(rl->pg, &b, why, sizeof why) < 0) {
        failed(rl, why);
        return -1;
    }
    slot_add(&rl->slot->relay_applied, (uint64_t)n - dead - held);
    slot_add(&rl->slot->relay_dead, dead);
    log_debug("source %s: %d row%s relayed (%llu to the dead table, %llu held), deleted "
              "%lld ms after Redis confirmed", rl->sc->name, n, n == 1 ? "" : "s",
              (unsigned long long)dead, (unsigned long long)held,
              (long long)(slots_now_ms() - t0));
    log_back(rl);
    working(rl);
    return n;
}

/* relay_batch_once, then the rows held for /metrics. */
static int relay_batch(struct relay *rl)
{
    int n = relay_batch_once(rl);
    __atomic_store_n(&rl->slot->relay_held, (int)relay_defer_count(rl->defer),
                     __ATOMIC_RELAXED);
    return n;
}

int relay_main(const struct daemon_conf *dc, size_t source, struct worker_slot *slot)
{
    struct relay rl = { .dc = dc, .sc = &dc->sources[source], .slot = slot };
    rl.pg = relay_pg_new(rl.sc);
    if (dc->redis.cluster)
        rl.defer = calloc(1, sizeof *rl.defer);
    if (!rl.pg || (dc->redis.cluster && !rl.defer)) {
        log_err("out of memory");
        relay_pg_free(rl.pg);
        free(rl.defer);
        return DAEMON_EXIT_OSERR;
    }
    log_info("source %s: relays %s.%s to Redis", rl.sc->name, rl.sc->schema, rl.sc->table);
    __atomic_store_n(&slot->ready, 1, __ATOMIC_RELAXED);
    while (!signals_stop_requested()) {
        if (connect_both(&rl) < 0 || !lead(&rl))
            continue;
        int n = relay_batch(&rl);
        if (n >= 0 && n < rl.sc->batch)
            wait_rows(&rl);
    }
    relay_pg_free(rl.pg);
    free(rl.defer);
    dq_close(rl.redis);
    return DAEMON_EXIT_OK;
}
