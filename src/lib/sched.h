/*
 * Recurring schedules: the commands and replies of the sched_* scripts,
 * the ids of the jobs they make, and the plan of which ticks a daemon
 * fires (docs/protocol.md).  Shared by libdelayq and the daemon's reaper.
 *
 * Exactly one job per tick: a tick's job is made by sched_fire, which
 * also moves the schedule to its next tick, and only while the schedule
 * still has the tick the caller read (compare-and-set); the job's id names
 * the tick, so not even a replayed call can make a second one.
 */
#ifndef DQ_SCHED_H
#define DQ_SCHED_H

#include <delayq/client.h>
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/cmd.h"
#include "lib/keys.h"
#include "util/cron.h"

/* How soon before its tick a daemon makes a tick's job: the job is due at
 * the tick, so it still starts on time, and a daemon's poll interval does
 * not make it late. */
#define SCHED_LOOKAHEAD_MS 3000
#define SCHED_ID_MAX (DQ_SCHEDULE_NAME_MAX + 40)

/* One call of sched_fire: fire tick_ms (-1: none) if the schedule's next
 * tick is still expected_ms, and move it to next_ms. */
struct sched_step {
    int64_t expected_ms;
    int64_t tick_ms;
    int64_t next_ms;
};

enum sched_fired {
    SCHED_FIRED,            /* the tick's job was made */
    SCHED_EXISTS,           /* the tick's job was there already */
    SCHED_ADVANCED,         /* no job (a skipped tick); the schedule moved on */
    SCHED_STALE,            /* the schedule had moved on: nothing written */
    SCHED_MISSING           /* no such schedule: nothing written */
};

/* Checks on a schedule's name: NULL when it is acceptable, otherwise a
 * constant phrase. */
const char *sched_check_name(const char *name);

/* "NAME@2026-11-23T10:05:00Z", the id of the job of the tick at tick_ms. */
void sched_tick_id(char *buf, size_t len, const char *name, int64_t tick_ms);
/* "NAME@now-2026-11-23T10:05:00.123Z", the id of a run-now job. */
void sched_now_id(char *buf, size_t len, const char *name, int64_t now_ms);

/* The first tick after `now_ms` of a new schedule (-1: none within eight
 * years).  "@every" ticks start from the whole second of now_ms. */
int64_t sched_first_tick(const struct cron_expr *e, const char *tz, int64_t now_ms);

/*
 * The sched_fire calls that bring a schedule whose next tick is t0 up to
 * date at `now_ms`: at most `max` steps into `steps`, returns how many.
 * A tick due within SCHED_LOOKAHEAD_MS, or late by at most
 * DQ_SCHEDULE_GRACE_MS, fires as it is (with those after it that are
 * also that close).  An older one starts a missed period, handled by the
 * catch-up policy: "one" fires t0 once and resumes after now; "none"
 * fires nothing and resumes after now; "all" fires each tick up to now,
 * oldest first, at most `max` (then resumes after now).
 */
size_t sched_plan(const struct cron_expr *e, const char *tz, dq_catch_up cu, int64_t t0,
                  int64_t now_ms, struct sched_step *steps, size_t max);

enum sched_add_mode {
    SCHED_ADD_NEW,          /* refuse a name that exists */
    SCHED_ADD_REPLACE,      /* overwrite it */
    SCHED_ADD_DECLARE       /* overwrite it only when its definition differs */
};

void sched_add_cmd(struct cmd *c, const struct queue_keys *k, const struct sched_keys *sk,
                   const dq_schedule_req *req, int64_t next_ms, enum sched_add_mode mode);
/* DQ_OK (*next_ms set: the stored one when declared unchanged),
 * DQ_ERR_EXISTS or DQ_ERR_REDIS (unexpected). */
dq_status sched_add_reply(const redisReply *r, int64_t *next_ms);

/* expected_ms < 0: run-now (no check, no move). `id` is borrowed. */
void sched_fire_cmd(struct cmd *c, const struct queue_keys *k, const struct sched_keys *sk,
                    const char *name, const struct sched_step *st, const char *id);
/* The outcome, or -1 for an unexpected reply. */
int sched_fire_reply(const redisReply *r);

void sched_remove_cmd(struct cmd *c, const struct queue_keys *k, const struct sched_keys *sk,
                      const char *name);

/* sched_pause: pause `name` (expr NULL), or resume it from next_ms with
 * the definition's expr and tz as read (see the script). */
void sched_pause_cmd(struct cmd *c, const struct queue_keys *k, const struct sched_keys *sk,
                     const char *name, const char *expr, const char *tz, int64_t next_ms);
/* sched_pause's reply: its status word into `status` (cut to len), the
 * time into *ms; DQ_ERR_REDIS when it is not one. */
dq_status sched_pause_reply(const redisReply *r, char *status, size_t len, int64_t *ms);

/* within_ms < 0: all schedules; otherwise those due within it.  `only`
 * (NULL: any) names the one schedule to list. */
void sched_list_cmd(struct cmd *c, const struct queue_keys *k, const struct sched_keys *sk,
                    int64_t within_ms, int limit, const char *only);
/* Fill `out` (freed with dq_schedule_list_free, also on failure). */
dq_status sched_list_reply(const redisReply *r, dq_schedule_list *out);

#endif
