/*
 * The admin process: a child of the supervisor (role "admin", forked,
 * watched and restarted like the reaper) that serves /metrics, /healthz
 * and the dashboard under /ui/ on the listening socket the supervisor
 * bound, and holds the Redis connections they need (the statistics
 * refresher, qstats.h, and the dashboard's, ui_data.h).  What it says of
 * the daemon it reads from shared memory the supervisor writes without
 * waiting (metrics.h, slots.h, ui_history.h); it never writes anything
 * the supervisor reads.  A crash of it costs only the requests open then:
 * the port stays bound by the supervisor, and the next admin process
 * (after RESPAWN_MIN_MS) answers the connections that waited meanwhile.
 *
 * Its process name is "delayqd-admin" (ps, top, /proc/PID/comm).
 *
 * One belongs to each configuration generation: a reload starts the new
 * one and stops the old (which stops accepting at once, and ends after
 * ADMIN_STOP_GRACE_MS), so the new configuration's credentials, queues and
 * Redis take effect together.
 */
#ifndef DQ_ADMIN_MAIN_H
#define DQ_ADMIN_MAIN_H

#include <stdint.h>
#include <sys/types.h>

#include "daemon/dconfig.h"
#include "daemon/admin/metrics.h"
#include "daemon/admin/ui_auth.h"
#include "daemon/admin/ui_history.h"
#include "daemon/slots.h"

#define ADMIN_STOP_GRACE_MS 1000    /* a stopped admin finishes answering */

/* What the supervisor hands its admin process (all inherited across fork). */
struct admin_args {
    const struct daemon_conf *dc;   /* its generation's */
    uint64_t conf_gen;              /* that generation's number (metrics.h) */
    int listen_fd;                  /* the admin socket (admin_socket.h) */
    struct worker_slot *slots;      /* the child table's, row i: slots[i] */
    size_t nslots;
    const struct metrics *metrics;  /* the supervisor's totals and table */
    struct ui_history *history;     /* the dashboard's, kept across restarts */
    struct ui_auth_store *sessions; /* the dashboard's sessions, likewise */
    pid_t parent;                   /* the supervisor */
};

/*
 * Run the admin process until SIGTERM (or the supervisor's death).  In the
 * forked child, after signals_child_setup.  Returns the exit code: 0 after
 * a stop, 71 when it could not set up (it is then restarted with backoff).
 */
int admin_main(const struct admin_args *a);

#endif
