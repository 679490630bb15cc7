#include "lib/sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/proto.h"
#include "util/timefmt.h"

#define EIGHT_YEARS_MS (INT64_C(8) * 366 * 86400 * 1000)

static const char *const catch_up_names[] = { "one", "all", "none" };

const char *dq_catch_up_str(dq_catch_up c)
{
    return (unsigned)c < 3 ? catch_up_names[c] : "?";
}

int dq_catch_up_parse(const char *s, dq_catch_up *out)
{
    for (int i = 0; s && i < 3; i++)
        if (strcmp(s, catch_up_names[i]) == 0) {
            *out = (dq_catch_up)i;
            return 0;
        }
    return -1;
}

const char *sched_check_name(const char *name)
{
    if (!name || !*name)
        return "schedule name is empty";
    if (strlen(name) > DQ_SCHEDULE_NAME_MAX)
        return "schedule name is longer than 128 bytes";
    for (const char *p = name; *p; p++)
        if (*p <= ' ' || *p > '~')
            return "schedule name has a space or a non-printable character";
    if (strchr(name, '@'))
        return "schedule name contains '@' (it separates the name from the tick "
               "in job ids)";
    return NULL;
}

void sched_tick_id(char *buf, size_t len, const char *name, int64_t tick_ms)
{
    time_t t = (time_t)(tick_ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    snprintf(buf, len, "%s@%04d-%02d-%02dT%02d:%02d:%02dZ", name, tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void sched_now_id(char *buf, size_t len, const char *name, int64_t now_ms)
{
    char iso[40];
    timefmt_iso(iso, sizeof iso, now_ms);
    snprintf(buf, len, "%s@now-%s", name, iso);
}

/* A tick of a schedule that never fires again (cron_next found none
 * within eight years) is put that far off: it is looked at again then. */
static int64_t next_or_far(int64_t next, int64_t from)
{
    return next >= 0 ? next : from + EIGHT_YEARS_MS;
}

int64_t sched_first_tick(const struct cron_expr *e, const char *tz, int64_t now_ms)
{
    if (e->every_ms > 0)
        return now_ms - now_ms % 1000 + e->every_ms;
    return cron_next(e, tz, now_ms);
}

/* The first tick after now of a schedule whose ticks include t0 (t0 <=
 * now): "@every" keeps its phase. */
static int64_t resume_after(const struct cron_expr *e, const char *tz, int64_t t0,
                            int64_t now)
{
    if (e->every_ms > 0)
        return t0 + ((now - t0) / e->every_ms + 1) * e->every_ms;
    return next_or_far(cron_next(e, tz, now), now);
}

size_t sched_plan(const struct cron_expr *e, const char *tz, dq_catch_up cu, int64_t t0,
                  int64_t now_ms, struct sched_step *steps, size_t max)
{
    if (max == 0)
        return 0;
    size_t n = 0;
    if (t0 >= now_ms - DQ_SCHEDULE_GRACE_MS) {
        /* On time: this tick, and those after it already this close. */
        for (int64_t t = t0; n < max && t <= now_ms + SCHED_LOOKAHEAD_MS;) {
            int64_t next = next_or_far(cron_next(e, tz, t), t);
            steps[n++] = (struct sched_step){ t, t, next };
            t = next;
        }
        return n;
    }
    int64_t resume = resume_after(e, tz, t0, now_ms);
    if (cu == DQ_CATCH_UP_ONE || cu == DQ_CATCH_UP_NONE) {
        steps[0] = (struct sched_step){ t0, cu == DQ_CATCH_UP_ONE ? t0 : -1, resume };
        return 1;
    }
    for (int64_t t = t0; n < max && t <= now_ms;) {
        int64_t next = next_or_far(cron_next(e, tz, t), t);
        steps[n++] = (struct sched_step){ t, t, next };
        t = next;
    }
    if (steps[n - 1].next_ms <= now_ms)
        steps[n - 1].next_ms = resume;  /* the bound: the rest is skipped */
    return n;
}

void sched_add_cmd(struct cmd *c, const struct queue_keys *k, const struct sched_keys *sk,
                   const dq_schedule_req *req, int64_t next_ms, enum sched_add_mode mode)
{
    cmd_eval_sched(c, DQ_SCRIPT_SCHED_ADD, k, sk);
    cmd_push_str(c, req->name);
    cmd_push_str(c, req->expr);
    cmd_push_str(c, req->tz ? req->tz : "");
    cmd_push_str(c, req->type);
    cmd_push(c, req->payload, req->payload_len);
    cmd_push_i64(c, req->max_attempts);
    cmd_push_str(c, dq_catch_up_str(req->catch_up));
    cmd_push_i64(c, next_ms);
    cmd_push_i64(c, mode);
}

dq_status sched_add_reply(const redisReply *r, int64_t *next_ms)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return DQ_ERR_REDIS;
    *next_ms = proto_elem_int(r, 1);
    if (proto_elem_is(r, 0, "exists"))
        return DQ_ERR_EXISTS;
    if (proto_elem_is(r, 0, "ok") || proto_elem_is(r, 0, "replaced")
        || proto_elem_is(r, 0, "same"))
        return DQ_OK;
    return DQ_ERR_REDIS;
}

void sched_fire_cmd(struct cmd *c, const struct queue_keys *k, const struct sched_keys *sk,
                    const char *name, const struct sched_step *st, const char *id)
{
    cmd_eval_sched(c, DQ_SCRIPT_SCHED_FIRE, k, sk);
    cmd_push_str(c, k->wake);
    cmd_push_str(c, name);
    if (st->expected_ms < 0)
        cmd_push_str(c, "-");
    else
        cmd_push_i64(c, st->expected_ms);
    cmd_push_i64(c, st->tick_ms);
    cmd_push_str(c, id);
    cmd_push_i64(c, st->next_ms);
}

int sched_fire_reply(const redisReply *r)
{
    static const char *const names[] = { "fired", "exists", "advanced", "stale", "missing" };
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2)
        return -1;
    for (int i = 0; i < 5; i++)
        if (proto_elem_is(r, 0, names[i]))
            return i;
    return -1;
}

void sched_remove_cmd(struct cmd *c, const struct queue_keys *k, const struct sched_keys *sk,
                      const char *name)
{
    cmd_eval_sched(c, DQ_SCRIPT_SCHED_REMOVE, k, sk);
    cmd_push_str(c, name);
}

void sched_list_cmd(struct cmd *c, const struct queue_keys *k, const struct sched_keys *sk,
                    int64_t within_ms, int limit, const char *only)
{
    cmd_eval_sched(c, DQ_SCRIPT_SCHED_LIST, k, sk);
    cmd_push_i64(c, within_ms < 0 ? -1 : within_ms);
    cmd_push_i64(c, limit);
    if (only)
        cmd_push_str(c, only);
}

void sched_pause_cmd(struct cmd *c, const struct queue_keys *k, const struct sched_keys *sk,
                     const char *name, const char *expr, const char *tz, int64_t next_ms)
{
    cmd_eval_sched(c, DQ_SCRIPT_SCHED_PAUSE, k, sk);
    cmd_push_str(c, name);
    cmd_push_str(c, expr ? "resume" : "pause");
    if (expr) {
        cmd_push_i64(c, next_ms);
        cmd_push_str(c, expr);
        cmd_push_str(c, tz ? tz : "");
    }
}

dq_status sched_pause_reply(const redisReply *r, char *status, size_t len, int64_t *ms)
{
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2
        || r->element[0]->type != REDIS_REPLY_STRING)
        return DQ_ERR_REDIS;
    snprintf(status, len, "%s", r->element[0]->str);
    *ms = proto_elem_int(r, 1);
    return DQ_OK;
}

#define LIST_FIELDS 10

/* One schedule from the ten elements at `at`. */
static dq_status read_schedule(const redisReply *r, size_t at, dq_schedule_info *s)
{
    s->name = proto_elem_dup(r, at, NULL);
    s->expr = proto_elem_dup(r, at + 1, NULL);
    s->tz = proto_elem_dup(r, at + 2, NULL);
    s->type = proto_elem_dup(r, at + 3, NULL);
    s->payload = proto_elem_dup(r, at + 4, &s->payload_len);
    s->max_attempts = (int)proto_elem_int(r, at + 5);
    s->catch_up = DQ_CATCH_UP_ONE;
    if (r->element[at + 6]->type == REDIS_REPLY_STRING)
        (void)dq_catch_up_parse(r->element[at + 6]->str, &s->catch_up);
    s->next_ms = proto_elem_int(r, at + 7);
    s->readable = proto_elem_int(r, at + 8) == 1;
    s->paused_since_ms = proto_elem_int(r, at + 9);
    if (!s->name || !s->expr || !s->tz || !s->type || !s->payload)
        return DQ_ERR_NOMEM;
    return DQ_OK;
}

dq_status sched_list_reply(const redisReply *r, dq_schedule_list *out)
{
    memset(out, 0, sizeof *out);
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 1
        || (r->elements - 1) % LIST_FIELDS)
        return DQ_ERR_REDIS;
    out->now_ms = proto_elem_int(r, 0);
    size_t n = (r->elements - 1) / LIST_FIELDS;
    if (n == 0)
        return DQ_OK;
    if (!(out->items = calloc(n, sizeof *out->items)))
        return DQ_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        out->n = i + 1;
        dq_status st = read_schedule(r, 1 + i * LIST_FIELDS, &out->items[i]);
        if (st != DQ_OK)
            return st;
    }
    return DQ_OK;
}

void dq_schedule_list_free(dq_schedule_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        dq_schedule_info *s = &l->items[i];
        free(s->name);
        free(s->expr);
        free(s->tz);
        free(s->type);
        free(s->payload);
    }
    free(l->items);
    memset(l, 0, sizeof *l);
}
