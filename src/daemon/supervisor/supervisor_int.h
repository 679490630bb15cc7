/*
 * The supervisor's state, shared by its two halves: supervisor.c (the
 * loop: the tick, signals, reloads, the admin socket) and children.c (the
 * child table: starting children, and settling up when one dies).  Like
 * nginx's cycle, one object, reached through the pointer each function is
 * given; nothing here is global.
 */
#ifndef DQ_SUPERVISOR_INT_H
#define DQ_SUPERVISOR_INT_H

#include <event2/event.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "daemon/dconfig.h"
#include "daemon/supervisor/generation.h"
#include "daemon/slots.h"
#include "daemon/admin/metrics.h"
#include "daemon/admin/ui_auth.h"
#include "daemon/admin/ui_history.h"

/* Rows for two full generations (old and new during a reload): workers,
 * a reaper and an admin process each.  More
 * generations may drain at once after reloads in a row: the rows the
 * configuration in force still lacks are then taken as old children exit
 * (start_missing). */
#define MAX_CHILDREN (2 * DCONFIG_MAX_WORKERS + 4)
#define MAX_GENERATIONS 8       /* older ones draining; a reload waits for room */

enum child_role { ROLE_NONE, ROLE_WORKER, ROLE_REAPER, ROLE_ADMIN };

/* One row of the child table (nginx's ngx_processes).  Row i uses slot i. */
struct child {
    enum child_role role;
    pid_t pid;                  /* 0: not running (waiting to respawn) */
    int queue;                  /* index into gen->conf->queues (workers);
                                   nqueues: the reaper; nqueues + 1: admin */
    unsigned rank;              /* which of the queue's workers (workers):
                                   picks its home partitions */
    struct generation *gen;     /* the configuration it was started with */
    int retiring;               /* asked to stop; not respawned */
    int64_t started_ms;
    int64_t respawn_at_ms;      /* when pid is 0 */
    int64_t backoff_ms;
    int64_t killed_for_timeout; /* the timeout in ms, when we killed it */
    struct slot_job killed_job; /* the job it was running then */
};

struct supervisor {
    struct event_base *base;
    struct generation *cur;     /* in force */
    /* Older ones, kept while their children live or their settler works. */
    struct generation *old[MAX_GENERATIONS];
    int reload_pending;         /* SIGHUP came while old[] was full */
    int missing_logged;         /* "N children wait for rows" was said */
    char owner_nonce[17];       /* this run's: names its workers' claims */
    const char *config_path;
    struct worker_slot *slots;
    struct child children[MAX_CHILDREN];
    pid_t pid;
    int stopping;
    int64_t stop_deadline_ms;
    int64_t settle_deadline_ms; /* stopping: the children are gone; wait
                                   for the settlers until then */
    int config_refused;         /* a child exited 78 */
    int ready_sent;             /* READY=1 told to systemd */
    int64_t watchdog_ms;        /* WATCHDOG=1 every this often; 0 none */
    int64_t watchdog_next_ms;
    struct metrics *metrics;    /* shared: totals of exited children, own
                                   counts, the child table (metrics.h) */
    struct ui_history *history; /* shared: the dashboard's last hour, which
                                   only the admin process touches */
    struct ui_auth_store *sessions; /* shared: the dashboard's sessions, the
                                   admin process's too */
    uint64_t conf_gen;          /* the number of s->cur (1 at start) */
    int admin_fd;               /* the admin socket, or -1 (admin_socket.h) */
    struct sockaddr_storage admin_addr; /* where admin_fd listens */
    socklen_t admin_addrlen;
    int admin_refused;          /* the admin process exited 78: not
                                   restarted until a reload */
};

/* ---- the child table (children.c) ---- */

/* Send `sig` to a child; a child already gone is not an error. */
void children_signal(const struct supervisor *s, const struct child *c, int sig);

/* Fork `c`'s process (it runs its role and never returns); -1 after
 * logging, with a respawn planned. */
int children_spawn(struct supervisor *s, struct child *c);

/* Give the configuration in force every child it lacks a row for;
 * returns how many still lack one. */
int children_start_missing(struct supervisor *s);

/* The worker's queue name; NULL for the reaper. */
const char *children_queue_of(const struct child *c);

/* Reap every child that exited, settle what it held, plan its respawn. */
void children_collect(struct supervisor *s);

/* Kill the workers whose running job overran its handler's timeout. */
void children_check_timeouts(struct supervisor *s, int64_t now);

/* Children with a process. */
int children_live(const struct supervisor *s);

/* Post the child table to the admin process (metrics_post_child): every
 * row that changed. */
void children_post(struct supervisor *s);

#endif
