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
 * sent (not connected, the partition's master out of reach, out of
 * memory: the callback never runs; ui_data_refusal says why).
 * Everything given to a callback is borrowed for the call.
 */
#ifndef DQ_UI_DATA_H
#define DQ_UI_DATA_H

#include <delayq/client.h>
#include <event2/event.h>
#include <stdint.h>

#include "daemon/dconfig.h"
#include "daemon/admin/ui_data_types.h"

#define UI_PAGE_MAX 100         /* entries per page, at most */
#define UI_OFFSET_MAX 100000    /* the deepest page of a partitioned queue */

struct ui_data;

/* Connect to dc's Redis (dc must outlive it).  NULL when out of memory. */
struct ui_data *ui_data_new(struct event_base *base, const struct daemon_conf *dc);
void ui_data_free(struct ui_data *d);
int ui_data_is_up(const struct ui_data *d);

/* Why the last call that returned -1 could not be sent, for the page
 * that says so ("Redis is not connected" when d is NULL). */
const char *ui_data_refusal(const struct ui_data *d);

/* A page of `which` in list order (due time, lease deadline, time of
 * death; oldest first), from `offset` (0..UI_OFFSET_MAX), at most `count`
 * (1..UI_PAGE_MAX), only jobs of `type` when not NULL.  `page` NULL: the
 * call failed, `err` says why. */
int ui_data_page(struct ui_data *d, const struct queue_conf *q, enum ui_list which,
                 int64_t offset, int count, const char *type, ui_page_fn fn, void *arg);

/* One job: `info` NULL with st DQ_ERR_NOTFOUND when there is none, or
 * another status and `err` when the call failed. */
int ui_data_show(struct ui_data *d, const struct queue_conf *q, const char *id,
                 ui_show_fn fn, void *arg);

/* The queue's recurring schedules; `list` NULL when the call failed. */
int ui_data_schedules(struct ui_data *d, const struct queue_conf *q,
                      ui_schedules_fn fn, void *arg);

/* `st`: DQ_OK, or why not as the library's call says it (DQ_ERR_NOTFOUND:
 * no such job in that state; DQ_ERR_RUNNING, DQ_ERR_DEAD), or the failure
 * to ask (DQ_ERR_CONNECT, DQ_ERR_REDIS...) with `err`; DQ_ERR_TIMEOUT when
 * the script was sent and no answer came (a timeout, a lost connection,
 * the dashboard's connection closed by a reload): it may have run, the
 * outcome is unknown.  `count`: the jobs moved or deleted (the *_ALL ones),
 * else 1 or 0. */
/* `id`: the job, for the one-job actions; NULL for the others. */
int ui_data_action(struct ui_data *d, const struct queue_conf *q, enum ui_action a,
                   const char *id, ui_action_fn fn, void *arg);

#endif
