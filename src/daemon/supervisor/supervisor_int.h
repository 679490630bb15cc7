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

#include "daemon/cancel_board.h"
#include "daemon/dconfig.h"
#include "daemon/settle_board.h"
#include "daemon/supervisor/generation.h"
#include "daemon/supervisor/reload_check.h"
#include "daemon/slots.h"
#include "daemon/admin/metrics.h"
#include "daemon/admin/ui_auth.h"
#include "daemon/admin/ui_history.h"

#define MAX_GENERATIONS 8       /* older ones draining; a reload waits for room */
/* Rows for two full generations (old and new during a reload: workers, a
 * reaper and an admin process each), and a settler for each generation
 * that may be alive.  More generations may drain at once after reloads in
 * a row: the rows the configuration in force still lacks are then taken
 * as old children exit (start_missing; the settler first). */
/* And a relay per source, of two generations too. */
#define MAX_CHILDREN (2 * DCONFIG_MAX_WORKERS + 4 + MAX_GENERATIONS + 1 \
                      + 2 * DCONFIG_MAX_SOURCES)

enum child_role { ROLE_NONE, ROLE_WORKER, ROLE_REAPER, ROLE_ADMIN, ROLE_SETTLER, ROLE_RELAY };

/* One row of the child table (nginx's ngx_processes).  Row i uses slot i. */
struct child {
    enum child_role role;
    pid_t pid;                  /* 0: not running (waiting to respawn) */
    int queue;                  /* index into gen->conf->queues (workers);
                                   nqueues: the reaper; nqueues + 1: admin;
                                   nqueues + 2 + i: the relay of source i;
                                   -1: the settler */
    unsigned rank;              /* which of the queue's workers (workers):
                                   picks its home partitions */
    struct generation *gen;     /* the configuration it was started with */
    int retiring;               /* asked to stop; not respawned */
    int64_t started_ms;
    int64_t respawn_at_ms;      /* when pid is 0 */
    int64_t backoff_ms;
    int64_t killed_for_timeout; /* the timeout in ms, when we killed it */
    int64_t killed_for_cancel;  /* the cancel grace in ms, when we killed it
                                   for a job cancelled while it ran */
    struct slot_job killed_job; /* the job it was running then */
    /* A dead worker whose settlement found the board full: its slot is
     * kept as it is (not reset, no respawn) until the tick posts it. */
    int unposted;
    char unposted_owner[64], unposted_cause[128];
};

struct supervisor {
    struct event_base *base;
    struct generation *cur;     /* in force */
    /* Older ones, kept while their children live or their settler works. */
    struct generation *old[MAX_GENERATIONS];
    uint64_t last_gen_id;       /* the newest generation's number */
    int reload_pending;         /* SIGHUP came while old[] was full */
    int missing_logged;         /* "N children wait for rows" was said */
    char owner_nonce[17];       /* this run's: names its workers' claims */
    const char *config_path;
    struct worker_slot *slots;
    struct cancel_request *cancels; /* the cancel board: a row per child
                                   row, beside slots (cancel_board.h) */
    struct settle_board *board; /* dead workers' posts for the settlers */
    int wake[2];                /* a byte on wake[1] (O_NONBLOCK, never
                                   waited on): look at the board */
    uint64_t failovers_seen;    /* the board's count already in metrics */
    struct reload_check check;  /* a reload's checker, while it runs */
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

/* In a child just forked: take the role's name for the log, set up its
 * signals with `orphan_exit_ms` as its bound once the supervisor is gone
 * (exits when it is gone already), and close what belongs to the
 * supervisor (the admin socket, unless it `keeps_admin_socket`). */
void children_leave_supervisor(struct supervisor *s, const char *role, int64_t orphan_exit_ms,
                               int keeps_admin_socket);

/* Fork `c`'s process (it runs its role and never returns); -1 after
 * logging, with a respawn planned. */
int children_spawn(struct supervisor *s, struct child *c);

/* Give the configuration in force every child it lacks a row for;
 * returns how many still lack one. */
int children_start_missing(struct supervisor *s);

/* The worker's queue name; NULL for the other roles. */
const char *children_queue_of(const struct child *c);

/* What the admin process labels the row with: a worker's queue, a relay's
 * source; NULL for the other roles. */
const char *children_label_of(const struct child *c);

/* Reap every child that exited, settle what it held, plan its respawn. */
void children_collect(struct supervisor *s);

/* Kill the workers whose running job overran its handler's timeout. */
void children_check_timeouts(struct supervisor *s, int64_t now);

/* Children with a process. */
int children_live(const struct supervisor *s);

/* Post the child table to the admin process (metrics_post_child): every
 * row that changed. */
void children_post(struct supervisor *s);

/* Children with a process, but for those that stop last: the settlers
 * and the admin process. */
int children_live_besides_settlers(const struct supervisor *s);

/* Stop the settlers of older generations once no worker of theirs is
 * left and nothing of theirs waits to be settled. */
void children_retire_settlers(struct supervisor *s);

/* Stopping, every child but the settlers gone: stop them once nothing is
 * left to settle, or at once with `force`; restart one that died with
 * work left. */
void children_stop_settlers(struct supervisor *s, int force);

/* The settle side of the tick (settle_side.c): count what the settlers
 * finished and the failovers the watcher saw, and post the deaths the
 * board had no room for. */
void settle_side_tick(struct supervisor *s);

/* A dead worker's jobs to its generation's settler: posted on the board
 * with a wake byte, or, the board full, kept in its row for the tick. */
void settle_side_post(struct supervisor *s, struct child *c, const char *owner,
                      const char *cause);

/* A death the board had no room for: its slot's counters (folded into the
 * totals already) zeroed, its job and tables kept for the post. */
void settle_side_keep_slot(struct supervisor *s, const struct child *c);

/* Settlements of generation `g` not finished yet (the board and rows). */
int settle_side_pending(const struct supervisor *s, const struct generation *g);

#endif
