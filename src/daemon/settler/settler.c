#include "daemon/settler/settler.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/exitcodes.h"
#include "daemon/log.h"
#include "daemon/settler/settle.h"
#include "daemon/signals.h"
#include "redis/sentinel_watch.h"

/* The board is scanned on every wake and at least this often: a wake byte
 * read by another generation's settler (they share the pipe) delays a post
 * by this much at most.  It also paces the stop flag and the watcher's
 * retirement. */
#define SCAN_MS 100

struct settler_proc;

/* Post `i` as the settlement's done argument. */
struct post_ref {
    struct settler_proc *sp;
    size_t i;
    int taken;                  /* being settled here */
};

struct settler_proc {
    const struct daemon_conf *dc;
    uint64_t gen;
    struct settle_board *board;
    struct event_base *base;
    struct settler *st;
    struct sentinel_watch *watch;
    struct event *wake, *scan;
    int wake_fd;
    pid_t supervisor;           /* the parent at start */
    struct post_ref refs[SETTLE_BOARD_POSTS];
};

static void on_settled(void *arg, int running_failed, int running_dead)
{
    struct post_ref *r = arg;
    settle_board_done(r->sp->board, r->i, running_failed, running_dead);
    r->taken = 0;
}

/* Start settling post `i`; 0, or -1 (out of memory: the next scan tries
 * again). */
static int take(struct settler_proc *sp, size_t i)
{
    const struct settle_post *p = &sp->board->posts[i];
    if (p->queue < 0 || (size_t)p->queue >= sp->dc->nqueues) {
        log_err("%s: settle request for queue #%d, which this configuration lacks; "
                "ignored", p->who, p->queue);
        settle_board_done(sp->board, i, 0, 0);
        return 0;
    }
    struct post_ref *r = &sp->refs[i];
    struct settle_req req = { .dc = sp->dc, .q = &sp->dc->queues[p->queue],
                              .tables = p->tables, .running_type = p->running_type,
                              .owner = p->owner, .cause = p->cause, .who = p->who,
                              .died_ms = p->posted_ms, .done = on_settled, .done_arg = r };
    r->taken = 1;
    if (settler_settle(sp->st, &req) < 0) {
        r->taken = 0;
        return -1;
    }
    return 0;
}

/* Take every post of this generation not taken yet. */
static void scan_board(struct settler_proc *sp)
{
    for (size_t i = 0; i < SETTLE_BOARD_POSTS; i++)
        if (!sp->refs[i].taken && settle_board_posted_for(sp->board, i, sp->gen)
            && take(sp, i) < 0)
            return;
}

static void on_master_moved(void *arg)
{
    struct settler_proc *sp = arg;
    settle_board_count_failover(sp->board);
    if (getppid() != sp->supervisor)
        return;                 /* it died: we stop at the next scan */
    if (kill(sp->supervisor, SIGUSR2) < 0)
        log_err("sentinel: kill(supervisor, SIGUSR2) to relay the move: %s",
                strerror(errno));
}

/* Watch the sentinels while this generation is in force, and only then
 * (an older one's settler may still be draining). */
static void keep_watch(struct settler_proc *sp)
{
    int in_force = settle_board_in_force(sp->board) == sp->gen;
    if (in_force && !sp->watch && sp->dc->redis.sentinel.master)
        sp->watch = sentinel_watch_new(sp->base, &sp->dc->redis, on_master_moved, sp);
    else if (!in_force && sp->watch) {
        sentinel_watch_free(sp->watch);
        sp->watch = NULL;
    }
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    char buf[256];
    while (read(fd, buf, sizeof buf) > 0)
        ;
    scan_board(arg);
}

static void on_scan(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct settler_proc *sp = arg;
    if (signals_stop_requested()) {
        event_base_loopbreak(sp->base);
        return;
    }
    scan_board(sp);
    keep_watch(sp);
}

/* The loop, its connection and its events; -1 when out of memory. */
static int set_up(struct settler_proc *sp, struct worker_slot *slot)
{
    for (size_t i = 0; i < SETTLE_BOARD_POSTS; i++)
        sp->refs[i] = (struct post_ref){ .sp = sp, .i = i };
    if (!(sp->base = event_base_new()))
        return -1;
    sp->st = settler_new(sp->base, sp->dc, &slot->redis_reconnects);
    sp->wake = event_new(sp->base, sp->wake_fd, EV_READ | EV_PERSIST, on_wake, sp);
    sp->scan = event_new(sp->base, -1, EV_PERSIST, on_scan, sp);
    const struct timeval every = { 0, SCAN_MS * 1000 };
    if (!sp->st || !sp->wake || !sp->scan || event_add(sp->wake, NULL) < 0
        || event_add(sp->scan, &every) < 0)
        return -1;
    return 0;
}

int settler_main(const struct daemon_conf *dc, uint64_t gen, struct settle_board *board,
                 int wake_fd, struct worker_slot *slot)
{
    struct settler_proc *sp = calloc(1, sizeof *sp);
    if (!sp) {
        log_err("out of memory");
        return DAEMON_EXIT_OSERR;
    }
    *sp = (struct settler_proc){ .dc = dc, .gen = gen, .board = board, .wake_fd = wake_fd,
                                 .supervisor = getppid() };
    int rc = DAEMON_EXIT_OSERR;
    if (set_up(sp, slot) < 0) {
        log_err("cannot set up: out of memory");
        goto done;
    }
    log_info("settles the jobs of configuration %llu's dead workers",
             (unsigned long long)gen);
    keep_watch(sp);
    scan_board(sp);
    event_base_dispatch(sp->base);
    rc = DAEMON_EXIT_OK;
done:
    sentinel_watch_free(sp->watch);
    settler_free(sp->st);       /* unfinished posts stay posted */
    if (sp->wake)
        event_free(sp->wake);
    if (sp->scan)
        event_free(sp->scan);
    if (sp->base)
        event_base_free(sp->base);
    free(sp);
    return rc;
}
