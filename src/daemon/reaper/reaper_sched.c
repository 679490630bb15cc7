#include "daemon/reaper/reaper_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/dconfig_sched.h"
#include "daemon/log.h"
#include "lib/proto.h"
#include "lib/sched.h"
#include "util/timefmt.h"

#define SCHED_POLL_MS 1000
#define SCHED_LIST_LIMIT 100    /* schedules fired per queue and poll */

struct reaper_sched;

struct sched_queue {
    struct reaper_sched *rs;
    const struct queue_conf *q;
    struct queue_keys keys;
    struct sched_keys sk;
    int busy;               /* a list, or fires of its schedules, in flight */
    int outstanding;        /* fires and declarations in flight */
    int declare;            /* store the config file's schedules at the
                               next list (after each connect) */
    char **unfireable;      /* schedules said to be unfireable, so that the
                               warning is given once, not every second */
    size_t nunfireable;
};

struct reaper_sched {
    const struct daemon_conf *dc;
    struct rconn *conn;
    struct event *timer;
    struct sched_queue *queues;
    struct sched_step steps[DQ_SCHEDULE_CATCH_UP_MAX];
};

/* One sched_fire in flight: what its reply is logged with. */
struct fire {
    struct sched_queue *sq;
    int64_t tick_ms;
    char id[SCHED_ID_MAX];
};

static void on_fire(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct fire *f = arg;
    struct sched_queue *sq = f->sq;
    int outcome = reply ? sched_fire_reply(reply) : -1;
    if (outcome == SCHED_FIRED)
        log_debug("queue=%s: schedule tick fired: job %s", sq->q->name, f->id);
    else if (outcome < 0 && reply)
        log_warn("queue=%s: firing %s failed: %s", sq->q->name, f->id,
                 reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
    free(f);
    if (--sq->outstanding == 0)
        sq->busy = 0;
}

/* One declaration in flight: its schedule, for the log. */
struct declared {
    struct sched_queue *sq;
    const struct sched_conf *sc;
};

static void on_declare(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct declared *d = arg;
    struct sched_queue *sq = d->sq;
    int64_t next;
    if (reply && sched_add_reply(reply, &next) == DQ_OK) {
        char iso[64] = "none: it is paused (delayq schedule resume)";
        if (next >= 0)
            timefmt_iso(iso, sizeof iso, next);
        if (!proto_elem_is(reply, 0, "same"))
            log_info("queue=%s: schedule %s from the config file %s: next tick %s",
                     sq->q->name, d->sc->name,
                     proto_elem_is(reply, 0, "ok") ? "added" : "changed", iso);
    } else if (reply) {
        log_warn("queue=%s: storing schedule %s from the config file failed: %s",
                 sq->q->name, d->sc->name,
                 reply->type == REDIS_REPLY_ERROR ? reply->str : "unexpected reply");
    }
    free(d);
    if (--sq->outstanding == 0)
        sq->busy = 0;
}

/* Store the config file's schedules of the queue: each added, changed, or
 * (unchanged) left with its next tick. */
static void declare_schedules(struct sched_queue *sq, int64_t now)
{
    const struct daemon_conf *dc = sq->rs->dc;
    for (size_t i = 0; i < dc->nschedules; i++) {
        const struct sched_conf *sc = &dc->schedules[i];
        struct cron_expr e;
        char err[300];
        if (strcmp(sc->queue, sq->q->name) != 0
            || cron_parse(sc->expr, &e, err, sizeof err) < 0)
            continue;               /* (checked when the file was read) */
        dq_schedule_req req = { .queue = sc->queue, .name = sc->name, .type = sc->type,
                                .expr = sc->expr, .tz = sc->tz, .payload = sc->payload,
                                .payload_len = strlen(sc->payload),
                                .max_attempts = sc->max_attempts,
                                .catch_up = sc->catch_up };
        int64_t first = sched_first_tick(&e, sc->tz, now);
        struct declared *d = malloc(sizeof *d);
        if (!d || first < 0) {
            free(d);
            continue;
        }
        *d = (struct declared){ sq, sc };
        struct cmd cmd;
        cmd_init(&cmd);
        sched_add_cmd(&cmd, &sq->keys, &sq->sk, &req, first, SCHED_ADD_DECLARE);
        if (rconn_send(sq->rs->conn, &cmd, DQ_SCRIPT_SCHED_ADD, on_declare, d) == 0)
            sq->outstanding++;
        else
            free(d);
        cmd_free(&cmd);
    }
}

/* Send one step of a schedule's plan. */
static void send_step(struct sched_queue *sq, const char *name, const struct sched_step *st)
{
    struct fire *f = calloc(1, sizeof *f);
    if (!f) {
        log_warn("queue=%s: schedule %s: out of memory, tick retried at the next poll",
                 sq->q->name, name);
        return;
    }
    f->sq = sq;
    f->tick_ms = st->tick_ms;
    sched_tick_id(f->id, sizeof f->id, name, st->tick_ms >= 0 ? st->tick_ms : st->expected_ms);
    struct cmd cmd;
    cmd_init(&cmd);
    sched_fire_cmd(&cmd, &sq->keys, &sq->sk, name, st, f->id);
    if (rconn_send(sq->rs->conn, &cmd, DQ_SCRIPT_SCHED_FIRE, on_fire, f) == 0) {
        sq->outstanding++;
    } else {
        /* The connection is down (logged by rconn) or memory ran out:
         * the tick is still due, so the next poll sends it again. */
        log_debug("queue=%s: schedule %s: tick not sent, retried at the next poll",
                  sq->q->name, name);
        free(f);
    }
    cmd_free(&cmd);
}

/* Say what the catch-up policy does with a missed period (once: only the
 * daemon whose fire wins acts on it, but each says what it tried). */
static void log_missed(const struct sched_queue *sq, const dq_schedule_info *s,
                       int64_t now, const struct sched_step *steps, size_t n)
{
    char since[40], late[32];
    timefmt_iso(since, sizeof since, steps[0].expected_ms);
    timefmt_duration(late, sizeof late, now - steps[0].expected_ms);
    log_info("queue=%s: schedule %s missed its ticks since %s (%s): catch_up=%s "
             "fires %zu job%s", sq->q->name, s->name, since, late,
             dq_catch_up_str(s->catch_up), steps[0].tick_ms < 0 ? 0 : n,
             (steps[0].tick_ms < 0 ? 0 : n) == 1 ? "" : "s");
}

/* The index of `name` among the schedules warned about, or -1. */
static ssize_t unfireable_find(const struct sched_queue *sq, const char *name)
{
    for (size_t i = 0; i < sq->nunfireable; i++)
        if (strcmp(sq->unfireable[i], name) == 0)
            return (ssize_t)i;
    return -1;
}

/*
 * A schedule that cannot be fired (a definition this daemon cannot read,
 * a time zone missing from this machine) is listed at every poll: warn
 * the first time, and again only after it was fixed and broke anew.  If
 * the name cannot be remembered, the warning simply repeats.
 */
static void unfireable_warn(struct sched_queue *sq, const char *name, const char *why)
{
    if (unfireable_find(sq, name) >= 0)
        return;
    log_warn("queue=%s: schedule %s cannot be fired: %s (its ticks wait until it "
             "is fixed)", sq->q->name, name, why);
    char **grown = realloc(sq->unfireable, (sq->nunfireable + 1) * sizeof *grown);
    if (!grown)
        return;
    sq->unfireable = grown;
    if ((grown[sq->nunfireable] = strdup(name)))
        sq->nunfireable++;
}

/* A schedule fires again: a later fault is worth a new warning. */
static void unfireable_clear(struct sched_queue *sq, const char *name)
{
    ssize_t i = unfireable_find(sq, name);
    if (i < 0)
        return;
    log_info("queue=%s: schedule %s can be fired again", sq->q->name, name);
    free(sq->unfireable[i]);
    sq->unfireable[i] = sq->unfireable[--sq->nunfireable];
}

static void fire_schedule(struct sched_queue *sq, const dq_schedule_info *s, int64_t now)
{
    struct cron_expr e;
    char err[300];
    if (!s->readable || cron_parse(s->expr, &e, err, sizeof err) < 0
        || cron_check_zone(s->tz, err, sizeof err) < 0) {
        unfireable_warn(sq, s->name, s->readable ? err : "unreadable definition");
        return;
    }
    unfireable_clear(sq, s->name);
    struct sched_step *steps = sq->rs->steps;
    size_t n = sched_plan(&e, s->tz, s->catch_up, s->next_ms, now, steps,
                          DQ_SCHEDULE_CATCH_UP_MAX);
    if (n && steps[0].expected_ms < now - DQ_SCHEDULE_GRACE_MS)
        log_missed(sq, s, now, steps, n);
    for (size_t i = 0; i < n; i++)
        send_step(sq, s->name, &steps[i]);
}

static void on_list(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct sched_queue *sq = arg;
    dq_schedule_list list = { 0 };
    if (!reply || sched_list_reply(reply, &list) != DQ_OK) {
        if (reply && reply->type == REDIS_REPLY_ERROR)
            log_warn("queue=%s: listing schedules failed: %s", sq->q->name, reply->str);
        dq_schedule_list_free(&list);
        sq->busy = 0;
        return;
    }
    if (sq->declare) {
        sq->declare = 0;
        declare_schedules(sq, list.now_ms);
    }
    for (size_t i = 0; i < list.n; i++)
        fire_schedule(sq, &list.items[i], list.now_ms);
    dq_schedule_list_free(&list);
    if (sq->outstanding == 0)
        sq->busy = 0;
}

static void poll_queue(struct sched_queue *sq)
{
    if (sq->busy)
        return;
    struct cmd cmd;
    cmd_init(&cmd);
    sched_list_cmd(&cmd, &sq->keys, &sq->sk, SCHED_LOOKAHEAD_MS, SCHED_LIST_LIMIT,
                   NULL);
    if (rconn_send(sq->rs->conn, &cmd, DQ_SCRIPT_SCHED_LIST, on_list, sq) == 0)
        sq->busy = 1;
    cmd_free(&cmd);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct reaper_sched *rs = arg;
    for (size_t i = 0; i < rs->dc->nqueues; i++)
        poll_queue(&rs->queues[i]);
}

struct reaper_sched *reaper_sched_new(struct event_base *base, struct rconn *conn,
                                      const struct daemon_conf *dc)
{
    struct reaper_sched *rs = calloc(1, sizeof *rs);
    if (!rs)
        return NULL;
    rs->dc = dc;
    rs->conn = conn;
    rs->queues = calloc(dc->nqueues ? dc->nqueues : 1, sizeof *rs->queues);
    rs->timer = event_new(base, -1, EV_PERSIST, on_timer, rs);
    if (!rs->queues || !rs->timer) {
        reaper_sched_free(rs);
        return NULL;
    }
    for (size_t i = 0; i < dc->nqueues; i++) {
        struct sched_queue *sq = &rs->queues[i];
        sq->rs = rs;
        sq->q = &dc->queues[i];
        /* A partitioned queue's schedules fire into partition 0. */
        keys_build_part(&sq->keys, dc->redis.prefix, sq->q->name, 0,
                        (unsigned)sq->q->partitions);
        keys_build_sched_part(&sq->sk, dc->redis.prefix, sq->q->name,
                              (unsigned)sq->q->partitions);
    }
    struct timeval tv = { SCHED_POLL_MS / 1000, (SCHED_POLL_MS % 1000) * 1000 };
    if (event_add(rs->timer, &tv) < 0) {
        log_err("reaper: cannot arm the schedule timer");
        reaper_sched_free(rs);
        return NULL;
    }
    return rs;
}

void reaper_sched_up(struct reaper_sched *rs)
{
    for (size_t i = 0; i < rs->dc->nqueues; i++)
        rs->queues[i].declare = 1;
    on_timer(-1, 0, rs);
}

void reaper_sched_free(struct reaper_sched *rs)
{
    if (!rs)
        return;
    if (rs->timer)
        event_free(rs->timer);
    for (size_t i = 0; rs->queues && i < rs->dc->nqueues; i++) {
        for (size_t j = 0; j < rs->queues[i].nunfireable; j++)
            free(rs->queues[i].unfireable[j]);
        free(rs->queues[i].unfireable);
    }
    free(rs->queues);
    free(rs);
}
