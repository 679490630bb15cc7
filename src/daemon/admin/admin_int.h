/*
 * The admin process's state, shared by its two halves: admin_main.c (the
 * process: set-up, signals, the supervisor's death, the stop) and
 * admin_view.c (what it answers: /metrics, /healthz, the dashboard's view
 * of the daemon, the history's samples).
 */
#ifndef DQ_ADMIN_INT_H
#define DQ_ADMIN_INT_H

#include <event2/event.h>

#include "daemon/dconfig.h"
#include "daemon/admin/http_admin.h"
#include "daemon/admin/qstats.h"
#include "daemon/admin/ui.h"
#include "daemon/admin/ui_data.h"

struct admin_args;

struct admin {
    const struct admin_args *a;
    struct event_base *base;
    struct http_admin *http;
    struct qstats *stats;           /* NULL: not yet set up */
    struct ui_data *data;           /* NULL while admin.ui is off */
    struct ui *ui;
    struct metrics_snap *snap;      /* the dashboard's last view (admin_view.c) */
    struct ui_queue_live live[DCONFIG_MAX_QUEUES];
    int open;                       /* accepting on the admin socket */
    int64_t open_by_ms;             /* accept from then on, fresh or not */
    int stopping;
    int failed;                     /* the loop ended on an error */
};

/* The routes of the admin server: /metrics and /healthz. */
extern const struct http_admin_route admin_routes[2];

/* Make the dashboard and hand it /ui/ on ad->http; -1 when out of memory. */
int admin_view_ui_setup(struct admin *ad);

/* Once a second: each queue's running totals into the history, while
 * admin.ui is on and this admin's configuration is in force. */
void admin_view_sample_history(struct admin *ad);

#endif
