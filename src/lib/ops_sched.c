/* libdelayq calls for recurring schedules: add, remove, run-now, list. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/client_internal.h"
#include "lib/partitions.h"
#include "lib/sched.h"

#define LIST_MAX 10000   /* schedules in one list, as sched_list.lua allows */

/* The queue's keys, both sets, after checking its name: partition 0's of
 * a partitioned queue, which hold its schedules and where they fire. */
static dq_status sched_keys_of(dq_client *c, const char *queue, struct queue_keys *k,
                               struct sched_keys *sk)
{
    unsigned n;
    dq_status st = client_queue_keys(c, queue, k);
    if (st == DQ_OK)
        st = part_count(c, queue, &n);
    if (st != DQ_OK)
        return st;
    part_keys(c, queue, 0, n, k);
    keys_build_sched_part(sk, c->prefix, queue, n);
    return DQ_OK;
}

static dq_status check_name(dq_client *c, const char *name)
{
    const char *why = sched_check_name(name);
    return why ? client_fail(c, DQ_ERR_INVALID, "%s", why) : DQ_OK;
}

/* The keys of the queue whose schedule `name` a call works on, after
 * checking both names. */
static dq_status sched_named(dq_client *c, const char *queue, const char *name,
                             struct queue_keys *k, struct sched_keys *sk)
{
    dq_status st = sched_keys_of(c, queue, k, sk);
    return st == DQ_OK ? check_name(c, name) : st;
}

/* Everything about a new schedule that can be checked here: the names,
 * the expression and the zone (which the scripts cannot check). */
static dq_status check_schedule(dq_client *c, const dq_schedule_req *req,
                                struct cron_expr *e)
{
    const char *why = keys_check_type(req->type);
    if (why)
        return client_fail(c, DQ_ERR_INVALID, "%s", why);
    dq_status st = check_name(c, req->name);
    if (st != DQ_OK)
        return st;
    char err[300];
    if (cron_parse(req->expr, e, err, sizeof err) < 0
        || cron_check_zone(req->tz, err, sizeof err) < 0)
        return client_fail(c, DQ_ERR_INVALID, "%s", err);
    if (req->payload_len > c->max_payload)
        return client_fail(c, DQ_ERR_TOO_LARGE, "payload is %zu bytes, over the limit "
                           "of %zu", req->payload_len, c->max_payload);
    if (req->payload_len && !req->payload)
        return client_fail(c, DQ_ERR_INVALID, "payload is NULL but its length is not 0");
    if (req->max_attempts < 0)
        return client_fail(c, DQ_ERR_INVALID, "max attempts is negative");
    if ((unsigned)req->catch_up > DQ_CATCH_UP_NONE)
        return client_fail(c, DQ_ERR_INVALID, "catch-up policy %d is not one, all or none",
                           (int)req->catch_up);
    return DQ_OK;
}

dq_status dq_schedule_add(dq_client *c, const dq_schedule_req *req, int64_t *next_ms)
{
    struct queue_keys k;
    struct sched_keys sk;
    struct cron_expr e;
    dq_status st = sched_keys_of(c, req->queue, &k, &sk);
    if (st == DQ_OK)
        st = check_schedule(c, req, &e);
    int64_t now, next;
    if (st == DQ_OK)
        st = dq_server_time(c, &now);
    if (st != DQ_OK)
        return st;
    /* The first tick on the Redis clock, which the daemons fire by. */
    if ((next = sched_first_tick(&e, req->tz, now)) < 0)
        return client_fail(c, DQ_ERR_INVALID, "expression \"%s\" fires at no time in "
                           "the next eight years", req->expr);
    if ((st = client_register_queue(c, req->queue)) != DQ_OK)
        return st;
    struct cmd cmd;
    cmd_init(&cmd);
    sched_add_cmd(&cmd, &k, &sk, req, next,
                  req->replace ? SCHED_ADD_REPLACE : SCHED_ADD_NEW);
    redisReply *r;
    st = client_run(c, &cmd, DQ_SCRIPT_SCHED_ADD, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    st = sched_add_reply(r, &next);
    freeReplyObject(r);
    if (st == DQ_ERR_EXISTS)
        return client_fail(c, st, "schedule %s already exists in queue %s (use replace)",
                           req->name, req->queue);
    if (st != DQ_OK)
        return client_fail(c, st, "unexpected reply from the sched_add script");
    if (next_ms)
        *next_ms = next;
    return DQ_OK;
}

dq_status dq_schedule_remove(dq_client *c, const char *queue, const char *name)
{
    struct queue_keys k;
    struct sched_keys sk;
    dq_status st = sched_named(c, queue, name, &k, &sk);
    if (st != DQ_OK)
        return st;
    struct cmd cmd;
    cmd_init(&cmd);
    sched_remove_cmd(&cmd, &k, &sk, name);
    redisReply *r;
    st = client_run(c, &cmd, DQ_SCRIPT_SCHED_REMOVE, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    int gone = r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
    freeReplyObject(r);
    if (gone == 0)
        return client_fail(c, DQ_ERR_NOTFOUND, "no schedule %s in queue %s", name, queue);
    if (gone != 1)
        return client_fail(c, DQ_ERR_REDIS, "unexpected reply from the sched_remove script");
    return DQ_OK;
}

/* Run a sched_pause command (freed here) and read its reply. */
static dq_status run_pause(dq_client *c, struct cmd *cmd, char *status, size_t len,
                           int64_t *ms)
{
    redisReply *r;
    dq_status st = client_run(c, cmd, DQ_SCRIPT_SCHED_PAUSE, &r);
    cmd_free(cmd);
    if (st != DQ_OK)
        return st;
    st = sched_pause_reply(r, status, len, ms);
    freeReplyObject(r);
    if (st != DQ_OK)
        return client_fail(c, st, "unexpected reply from the sched_pause script");
    return DQ_OK;
}

dq_status dq_schedule_run_now(dq_client *c, const char *queue, const char *name,
                              dq_enqueued *out)
{
    struct queue_keys k;
    struct sched_keys sk;
    int64_t now;
    dq_status st = sched_named(c, queue, name, &k, &sk);
    if (st == DQ_OK)
        st = dq_server_time(c, &now);
    if (st != DQ_OK)
        return st;
    char id[SCHED_ID_MAX];
    sched_now_id(id, sizeof id, name, now);
    struct sched_step step = { -1, now, 0 };
    struct cmd cmd;
    cmd_init(&cmd);
    sched_fire_cmd(&cmd, &k, &sk, name, &step, id);
    redisReply *r;
    st = client_run(c, &cmd, DQ_SCRIPT_SCHED_FIRE, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    int fired = sched_fire_reply(r);
    freeReplyObject(r);
    if (fired == SCHED_MISSING)
        return client_fail(c, DQ_ERR_NOTFOUND, "no schedule %s in queue %s", name, queue);
    if (fired == SCHED_EXISTS)
        return client_fail(c, DQ_ERR_EXISTS, "job %s exists already", id);
    if (fired != SCHED_FIRED)
        return client_fail(c, DQ_ERR_REDIS, "unexpected reply from the sched_fire script");
    if (out) {
        snprintf(out->id, sizeof out->id, "%s", id);
        out->due_ms = now;
        out->replaced = false;
    }
    return DQ_OK;
}

dq_status dq_schedule_pause(dq_client *c, const char *queue, const char *name,
                            int64_t *since_ms)
{
    struct queue_keys k;
    struct sched_keys sk;
    dq_status st = sched_named(c, queue, name, &k, &sk);
    if (st != DQ_OK)
        return st;
    struct cmd cmd;
    cmd_init(&cmd);
    sched_pause_cmd(&cmd, &k, &sk, name, NULL, NULL, 0);
    char status[16];
    int64_t ms;
    if ((st = run_pause(c, &cmd, status, sizeof status, &ms)) != DQ_OK)
        return st;
    if (strcmp(status, "missing") == 0)
        return client_fail(c, DQ_ERR_NOTFOUND, "no schedule %s in queue %s", name, queue);
    if (strcmp(status, "paused") != 0 && strcmp(status, "already") != 0)
        return client_fail(c, DQ_ERR_REDIS, "unexpected reply from the sched_pause script");
    if (since_ms)
        *since_ms = ms;
    return DQ_OK;
}

/* One schedule's definition, as sched_list reads it: DQ_ERR_NOTFOUND when
 * there is none. */
static dq_status read_one(dq_client *c, const struct queue_keys *k, const struct sched_keys *sk,
                          const char *queue, const char *name, dq_schedule_list *l)
{
    struct cmd cmd;
    cmd_init(&cmd);
    sched_list_cmd(&cmd, k, sk, -1, 1, name);
    redisReply *r;
    dq_status st = client_run(c, &cmd, DQ_SCRIPT_SCHED_LIST, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    st = sched_list_reply(r, l);
    freeReplyObject(r);
    if (st != DQ_OK)
        return client_fail(c, st, "unexpected reply from the sched_list script");
    if (l->n != 1)
        return client_fail(c, DQ_ERR_NOTFOUND, "no schedule %s in queue %s", name, queue);
    return DQ_OK;
}

/* One resume: read the definition, find its next tick after now on the
 * Redis clock, and store it unless the definition changed meanwhile
 * (status "changed": the caller reads it again). */
static dq_status resume_once(dq_client *c, const struct queue_keys *k,
                             const struct sched_keys *sk, const char *queue, const char *name,
                             char *status, size_t len, int64_t *next)
{
    dq_schedule_list l = { 0 };
    dq_status st = read_one(c, k, sk, queue, name, &l);
    const dq_schedule_info *s = st == DQ_OK ? &l.items[0] : NULL;
    struct cron_expr e;
    char err[300];
    if (s && s->paused_since_ms < 0) {
        snprintf(status, len, "running");
        *next = s->next_ms;
    } else if (s && (!s->readable || cron_parse(s->expr, &e, err, sizeof err) < 0)) {
        st = client_fail(c, DQ_ERR_INVALID, "schedule %s has an unreadable definition: "
                         "remove it and add it again", name);
    } else if (s && (*next = sched_first_tick(&e, s->tz, l.now_ms)) < 0) {
        st = client_fail(c, DQ_ERR_INVALID, "expression \"%s\" fires at no time in the "
                         "next eight years", s->expr);
    } else if (s) {
        struct cmd cmd;
        cmd_init(&cmd);
        sched_pause_cmd(&cmd, k, sk, name, s->expr, s->tz, *next);
        st = run_pause(c, &cmd, status, len, next);
    }
    dq_schedule_list_free(&l);
    return st;
}

dq_status dq_schedule_resume(dq_client *c, const char *queue, const char *name,
                             int64_t *next_ms)
{
    struct queue_keys k;
    struct sched_keys sk;
    dq_status st = sched_named(c, queue, name, &k, &sk);
    char status[16] = "changed";
    int64_t next = 0;
    /* A definition replaced between the read and the write is read again
     * (a few times: someone replacing it without end wins). */
    for (int i = 0; st == DQ_OK && i < 5 && strcmp(status, "changed") == 0; i++)
        st = resume_once(c, &k, &sk, queue, name, status, sizeof status, &next);
    if (st != DQ_OK)
        return st;
    if (strcmp(status, "missing") == 0)
        return client_fail(c, DQ_ERR_NOTFOUND, "no schedule %s in queue %s", name, queue);
    if (strcmp(status, "resumed") != 0 && strcmp(status, "running") != 0)
        return client_fail(c, DQ_ERR_REDIS, "schedule %s: resume failed (%s)", name, status);
    if (next_ms)
        *next_ms = next;
    return DQ_OK;
}

dq_status dq_schedule_list_get(dq_client *c, const char *queue, dq_schedule_list *out)
{
    memset(out, 0, sizeof *out);
    struct queue_keys k;
    struct sched_keys sk;
    dq_status st = sched_keys_of(c, queue, &k, &sk);
    if (st != DQ_OK)
        return st;
    struct cmd cmd;
    cmd_init(&cmd);
    sched_list_cmd(&cmd, &k, &sk, -1, LIST_MAX, NULL);
    redisReply *r;
    st = client_run(c, &cmd, DQ_SCRIPT_SCHED_LIST, &r);
    cmd_free(&cmd);
    if (st != DQ_OK)
        return st;
    st = sched_list_reply(r, out);
    freeReplyObject(r);
    if (st != DQ_OK)
        return client_fail(c, st, "unexpected reply from the sched_list script");
    return DQ_OK;
}
