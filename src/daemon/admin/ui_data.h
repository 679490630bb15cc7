/*
 * ui_data: what the dashboard asks Redis, without ever blocking the
 * admin process: every call sends over the dashboard's own asynchronous
 * connection (rconn.h) and its callback runs on the admin process's loop
 * when the answer (or the failure) is in.  Reads are the no-writes
 * scripts (browse, show, dead_list, sched_list); each action is the one
 * protocol script the CLI runs for it (requeue, purge, cancel, run_now,
 * pause, resume), on every partition of the queue where it concerns the
 * whole queue, on the job's partition where it concerns one job.
 *
 * A call returns 0 when sent (its callback then runs exactly once, also
 * when the ui_data is freed: with a failure), or -1 when it could not be
 * sent (not connected, out of memory: the callback never runs).
 * Everything given to a callback is borrowed for the call.
 */
#ifndef DQ_UI_DATA_H
#define DQ_UI_DATA_H

#include <delayq/client.h>
#include <event2/event.h>
#include <stdint.h>

#include "daemon/dconfig.h"

#define UI_PAGE_MAX 100         /* entries per page, at most */
#define UI_OFFSET_MAX 100000    /* the deepest page of a partitioned queue */

struct ui_data;

/* Connect to dc's Redis (dc must outlive it).  NULL when out of memory. */
struct ui_data *ui_data_new(struct event_base *base, const struct daemon_conf *dc);
void ui_data_free(struct ui_data *d);
int ui_data_is_up(const struct ui_data *d);

enum ui_list { UI_LIST_DELAYED, UI_LIST_PROCESSING, UI_LIST_DEAD };

struct ui_entry {
    char *id;
    char *type;
    int64_t at_ms;              /* due time, lease deadline or time of death */
    int attempts;               /* attempts made (processing: incl. this one) */
    int max_attempts;           /* 0: the consumer's default */
    int priority;               /* 0..9 */
    int64_t created_ms;
    size_t payload_len;
    char *last_error;           /* "" when none */
    int unreadable;             /* the record cannot be read: last_error says why */
};

struct ui_page {
    struct ui_entry *e;
    size_t n;
    int64_t total;              /* in the list (all types) */
    int64_t matched;            /* with a type filter: entries of that type
                                   found (-1: more than were examined) */
    int64_t now_ms;             /* the server's clock */
};

/* A page of `which` in list order (due time, lease deadline, time of
 * death; oldest first), from `offset` (0..UI_OFFSET_MAX), at most `count`
 * (1..UI_PAGE_MAX), only jobs of `type` when not NULL.  `page` NULL: the
 * call failed, `err` says why. */
typedef void (*ui_page_fn)(const struct ui_page *page, const char *err, void *arg);
int ui_data_page(struct ui_data *d, const struct queue_conf *q, enum ui_list which,
                 int64_t offset, int count, const char *type, ui_page_fn fn, void *arg);

/* One job: `info` NULL with st DQ_ERR_NOTFOUND when there is none, or
 * another status and `err` when the call failed. */
typedef void (*ui_show_fn)(const dq_job_info *info, dq_status st, const char *err,
                           void *arg);
int ui_data_show(struct ui_data *d, const struct queue_conf *q, const char *id,
                 ui_show_fn fn, void *arg);

/* The queue's recurring schedules; `list` NULL when the call failed. */
typedef void (*ui_schedules_fn)(const dq_schedule_list *list, const char *err, void *arg);
int ui_data_schedules(struct ui_data *d, const struct queue_conf *q,
                      ui_schedules_fn fn, void *arg);

enum ui_action {
    UI_ACT_REQUEUE,             /* one dead job back to due now */
    UI_ACT_PURGE,               /* one dead job deleted */
    UI_ACT_CANCEL,              /* one delayed job deleted */
    UI_ACT_RUN_NOW,             /* one delayed job due now */
    UI_ACT_REQUEUE_ALL,         /* every dead job back to due now */
    UI_ACT_PURGE_ALL,           /* every dead job deleted */
    UI_ACT_PAUSE,
    UI_ACT_RESUME
};

/* `st`: DQ_OK, or why not as the library's call says it (DQ_ERR_NOTFOUND:
 * no such job in that state; DQ_ERR_RUNNING, DQ_ERR_DEAD), or the failure
 * to ask (DQ_ERR_CONNECT, DQ_ERR_REDIS...) with `err`.  `count`: the jobs moved or deleted (the *_ALL ones),
 * else 1 or 0. */
typedef void (*ui_action_fn)(dq_status st, int64_t count, const char *err, void *arg);
/* `id`: the job, for the one-job actions; NULL for the others. */
int ui_data_action(struct ui_data *d, const struct queue_conf *q, enum ui_action a,
                   const char *id, ui_action_fn fn, void *arg);

#endif
