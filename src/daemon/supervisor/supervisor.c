/*
 * The supervisor (nginx's master): it forks the children a configuration
 * asks for (children.c), watches and restarts them, relays signals, runs
 * reloads as a swap of generations, feeds systemd's watchdog, and holds
 * the admin socket that its admin process (admin_main.h) serves /metrics,
 * /healthz and the dashboard on.  It never waits on Redis: a dead
 * worker's jobs are settled by its generation's settler process
 * (settle_side.c posts them), the sentinels are watched there too, and a
 * reload's checks run in a short-lived child (reload_check.h).
 */
#include "config.h"

#include "daemon/supervisor/supervisor.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/exitcodes.h"
#include "daemon/supervisor/admin_socket.h"
#include "daemon/supervisor/generation.h"
#include "daemon/worker/handlers.h"
#include "daemon/log.h"
#include "daemon/admin/metrics.h"
#include "daemon/supervisor/notify.h"
#include "daemon/supervisor/qparts_record.h"
#include "daemon/signals.h"
#include "daemon/slots.h"
#include "daemon/supervisor/strays.h"
#include "daemon/supervisor/supervisor_int.h"

_Static_assert(MAX_CHILDREN <= METRICS_CHILDREN_MAX, "every row can be posted");

#define TICK_MS 50
#define SETTLE_WAIT_MS 5000     /* at a stop, wait this long for settlements */

/* This run's nonce, which names its workers' claims (children.c). */
static void draw_nonce(struct supervisor *s)
{
    uint64_t v = 0;
    FILE *f = fopen("/dev/urandom", "r");
    if (!f || fread(&v, sizeof v, 1, f) != 1)
        v = ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ (uint64_t)slots_now_us();
    if (f)
        fclose(f);
    snprintf(s->owner_nonce, sizeof s->owner_nonce, "%016llx", (unsigned long long)v);
}

/* ---- the tick: timeouts, respawns, shutdown ----------------------------- */

static int generation_in_use(const struct supervisor *s, const struct generation *g)
{
    if (settle_side_pending(s, g))
        return 1;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s->children[i].role != ROLE_NONE && s->children[i].gen == g)
            return 1;
    return 0;
}

/* Free the older generations once no child runs with them and nothing of
 * theirs waits to be settled. */
static void drop_old_generations(struct supervisor *s)
{
    for (int g = 0; g < MAX_GENERATIONS; g++)
        if (s->old[g] && !generation_in_use(s, s->old[g])) {
            generation_free(s->old[g]);
            s->old[g] = NULL;
        }
}

/* Tell systemd we are ready once every worker of the configuration in
 * force is connected and claiming; keep its watchdog fed. */
static void notify_progress(struct supervisor *s, int64_t now)
{
    if (s->watchdog_ms && now >= s->watchdog_next_ms) {
        notify_send("WATCHDOG=1");
        s->watchdog_next_ms = now + s->watchdog_ms;
    }
    if (s->ready_sent || s->stopping)
        return;
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        if (c->role == ROLE_WORKER && c->gen == s->cur && !c->retiring
            && (!c->pid || !s->slots[i].ready))
            return;
    }
    /* The log line first: whoever sees READY=1 finds it in the log. */
    log_info("ready: every worker is connected and claiming");
    notify_send("READY=1");
    s->ready_sent = 1;
}

static void reload(struct supervisor *s);
static void reload_checked(struct supervisor *s);

/* Respawns, the children the configuration in force still lacks, and a
 * reload that waited for room. */
static void keep_children(struct supervisor *s, int64_t now)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        if (c->role != ROLE_NONE && !c->pid && c->respawn_at_ms && now >= c->respawn_at_ms)
            children_spawn(s, c);
    }
    if (s->reload_pending) {
        for (int g = 0; g < MAX_GENERATIONS; g++)
            if (!s->old[g]) {
                s->reload_pending = 0;
                reload(s);
                break;
            }
    }
    if (s->config_refused)
        return;
    int missing = children_start_missing(s);
    if (missing == 0 && s->missing_logged) {
        log_info("every child of the configuration in force runs again");
        s->missing_logged = 0;
    }
}

/* Stopping: the admin process answers (/healthz: "stopping") while the
 * others drain; once every other child is gone it is asked to stop too. */
static void stop_admin_when_alone(struct supervisor *s)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        if (c->role != ROLE_NONE && c->role != ROLE_ADMIN && c->pid)
            return;
    }
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        if (c->role == ROLE_ADMIN && c->pid && !c->retiring) {
            c->retiring = 1;
            children_signal(s, c, SIGTERM);
        }
    }
}

/* Stopping: wait for the workers and the reaper, then for the settlers to
 * settle what they left (at most SETTLE_WAIT_MS) and stop, then for the
 * admin process; kill what is left at the deadline. */
static void drain(struct supervisor *s, int64_t now)
{
    stop_admin_when_alone(s);
    if (children_live_besides_settlers(s) == 0) {
        if (!s->settle_deadline_ms)
            s->settle_deadline_ms = now + SETTLE_WAIT_MS;
        children_stop_settlers(s, now >= s->settle_deadline_ms);
    }
    int rows = 0;
    for (int i = 0; i < MAX_CHILDREN; i++)
        rows += s->children[i].role != ROLE_NONE;
    if (children_live(s) == 0 && (rows == 0 || now >= s->settle_deadline_ms)) {
        event_base_loopbreak(s->base);
        return;
    }
    if (children_live(s) == 0)
        return;
    if (now >= s->stop_deadline_ms) {
        /* The settlers last: they settle what the killed leave. */
        int settlers_too = s->settle_deadline_ms && now >= s->settle_deadline_ms;
        int n = settlers_too ? children_live(s) : children_live_besides_settlers(s);
        if (n > 0)
            log_warn("shutdown timeout: killing %d child%s", n, n == 1 ? "" : "ren");
        for (int i = 0; i < MAX_CHILDREN; i++)
            if (s->children[i].role != ROLE_NONE && s->children[i].pid
                && (settlers_too || s->children[i].role != ROLE_SETTLER))
                children_signal(s, &s->children[i], SIGKILL);
        s->stop_deadline_ms = now + (settlers_too ? 60000 : SETTLE_WAIT_MS);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct supervisor *s = arg;
    int64_t now = slots_now_ms();
    children_collect(s);
    children_check_timeouts(s, now);
    settle_side_tick(s);
    reload_check_enforce(&s->check, now);
    drop_old_generations(s);
    notify_progress(s, now);
    metrics_post_state(s->metrics, s->stopping, s->conf_gen);
    if (s->stopping) {
        drain(s, now);
        return;
    }
    reload_checked(s);
    children_retire_settlers(s);
    keep_children(s, now);
    children_post(s);
    if (s->config_refused && children_live_besides_settlers(s) == 0) {
        log_err("no worker can run with this configuration: exiting");
        event_base_loopbreak(s->base);
    }
}

/* ---- the admin socket ------------------------------------------------------ */

static void admin_unlisten(struct supervisor *s)
{
    if (s->admin_fd >= 0 && close(s->admin_fd) < 0)
        log_warn("metrics: close of the admin socket: %s", strerror(errno));
    s->admin_fd = -1;
}

/* Hold the admin socket where the configuration in force says: at start,
 * and on reload (move, or stop).  A new address is bound before the old
 * one is let go, so a reload that cannot bind it keeps the old one (-1
 * after logging why).  The admin processes started from now on get it;
 * the one of the previous configuration keeps its copy until it ends. */
static int admin_listen(struct supervisor *s)
{
    const struct daemon_conf *dc = s->cur->conf;
    char err[300];
    if (!dc->metrics_listen) {
        if (s->admin_fd >= 0)
            log_info("metrics: no longer served");
        admin_unlisten(s);
        return 0;
    }
    if (s->admin_fd >= 0 && s->admin_addrlen == dc->metrics_addrlen
        && memcmp(&s->admin_addr, &dc->metrics_addr, dc->metrics_addrlen) == 0)
        return 0;
    int fd = admin_socket_bind((const struct sockaddr *)&dc->metrics_addr,
                               dc->metrics_addrlen, err, sizeof err);
    if (fd < 0) {
        log_err("metrics: cannot listen on %s: %s%s", dc->metrics_listen, err,
                s->admin_fd >= 0 ? "; still serving on the previous address" : "");
        return -1;
    }
    admin_unlisten(s);
    s->admin_fd = fd;
    memcpy(&s->admin_addr, &dc->metrics_addr, dc->metrics_addrlen);
    s->admin_addrlen = dc->metrics_addrlen;
    log_info("metrics: serving /metrics and /healthz on http://%s", dc->metrics_listen);
    return 0;
}

/* ---- signals ------------------------------------------------------------- */

/* SIGTERM to the children (the retiring ones only, at a reload) but the
 * settlers, which stop once what the others leave is settled
 * (children_stop_settlers, children_retire_settlers).  At a stop the admin
 * process of the configuration in force is left to the end
 * (stop_admin_when_alone). */
static void ask_to_stop(struct supervisor *s, int retiring_only)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        if (c->role == ROLE_NONE || c->role == ROLE_SETTLER
            || (retiring_only && !c->retiring)
            || (!retiring_only && c->role == ROLE_ADMIN && c->pid && !c->retiring))
            continue;
        if (c->pid)
            children_signal(s, c, SIGTERM);
        else
            c->role = ROLE_NONE;    /* waiting to respawn: just forget it */
    }
}

static void on_stop_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    struct supervisor *s = arg;
    if (s->stopping)
        return;
    log_info("%s: stopping; running jobs may finish within %lldms", strsignal((int)sig),
             (long long)s->cur->conf->shutdown_timeout_ms);
    s->stopping = 1;
    notify_send("STOPPING=1");
    s->stop_deadline_ms = slots_now_ms() + s->cur->conf->shutdown_timeout_ms;
    reload_check_cancel(&s->check);
    ask_to_stop(s, 0);
}

/* A free place among the older generations, or -1. */
static int free_old_place(const struct supervisor *s)
{
    for (int g = 0; g < MAX_GENERATIONS; g++)
        if (!s->old[g])
            return g;
    return -1;
}

/* A reload that cannot go ahead: the configuration in force stays. */
static void reload_refused(struct supervisor *s, const char *why)
{
    if (s->ready_sent)
        notify_send("READY=1");
    log_err("reload refused: %s; the configuration in force stays", why);
}

/* In the reload's checker, just forked: drop what is the supervisor's.
 * SIGTERM (the supervisor's death, PR_SET_PDEATHSIG) ends it at once:
 * nobody waits for its answer then. */
static void checker_in_child(void *arg)
{
    struct supervisor *s = arg;
    children_leave_supervisor(s, "check", s->cur->conf->shutdown_timeout_ms, 0);
    close(s->wake[0]);
    close(s->wake[1]);
    struct sigaction sa = { .sa_handler = SIG_DFL };
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0)
        _exit(DAEMON_EXIT_OSERR);
}

/*
 * SIGHUP: parse the file, and have the rest checked in a short-lived child
 * (reload_check.h: handlers, partition counts), whose exit
 * (reload_checked) applies the new generation or refuses it; the
 * supervisor goes on meanwhile.  With MAX_GENERATIONS still draining, or
 * a check already running, the reload waits (the tick runs it once it
 * can), so no SIGHUP is lost either.
 */
static void reload(struct supervisor *s)
{
    if (free_old_place(s) < 0 || s->check.pid) {
        if (!s->reload_pending && !s->check.pid)
            log_warn("reload: %d earlier configurations still draining; reloading once "
                     "one is gone", MAX_GENERATIONS);
        s->reload_pending = 1;
        return;
    }
    char err[800];
    if (s->ready_sent)
        notify_send("RELOADING=1");
    struct daemon_conf *conf = malloc(sizeof *conf);
    if (!conf) {
        reload_refused(s, "out of memory");
        return;
    }
    if (dconfig_load(conf, s->config_path, err, sizeof err) < 0) {
        free(conf);
        reload_refused(s, err);
        return;
    }
    qparts_carry_over(s->cur->conf, conf);
    if (reload_check_start(&s->check, s->cur->conf, conf, checker_in_child, s, err,
                           sizeof err) < 0)
        reload_refused(s, err);
}

/* The line that says a reload took effect, with the worker count so an
 * operator (and a test) can tell which configuration is in force. */
static void log_reloaded(const char *path, const struct daemon_conf *conf, int missing)
{
    int workers = 0;
    for (size_t i = 0; i < conf->nqueues; i++)
        workers += conf->queues[i].workers;
    char what[160];
    snprintf(what, sizeof what, "%zu queue%s, %d worker%s, %zu handler%s", conf->nqueues,
             conf->nqueues == 1 ? "" : "s", workers, workers == 1 ? "" : "s", conf->nhandlers,
             conf->nhandlers == 1 ? "" : "s");
    if (missing > 0)
        log_warn("reloaded %s: %s; %d child%s start as the previous configuration's exit",
                 path, what, missing, missing == 1 ? "" : "ren");
    else
        log_info("reloaded %s: %s", path, what);
}

/*
 * The checked configuration `conf` (taken over): build its generation; if
 * that fails, keep the one in force.  Otherwise swap: the old children
 * finish the job in hand and give back the rest of their batch while the
 * new ones start, so no job is lost or run twice.  The old generation's
 * settler stays until what its workers leave is settled
 * (children_retire_settlers).
 */
static void reload_apply(struct supervisor *s, struct daemon_conf *conf)
{
    int place = free_old_place(s);      /* kept free while the check ran */
    struct generation *g = place < 0 ? NULL
                           : generation_new(conf, s->last_gen_id + 1);
    if (!g) {
        reload_refused(s, place < 0 ? "no room for another generation" : "out of memory");
        dconfig_free(conf);
        free(conf);
        return;
    }
    if (s->ready_sent)
        notify_send("READY=1");
    s->last_gen_id = g->id;
    settle_board_set_in_force(s->board, g->id);
    s->old[place] = s->cur;
    s->cur = g;
    s->conf_gen = g->id;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s->children[i].role != ROLE_NONE && s->children[i].role != ROLE_SETTLER)
            s->children[i].retiring = 1;
    ask_to_stop(s, 1);
    s->config_refused = 0;
    s->admin_refused = 0;
    log_set_level(conf->log_level);
    admin_listen(s);
    metrics_post_state(s->metrics, s->stopping, s->conf_gen);
    children_post(s);
    int missing = children_start_missing(s);
    s->missing_logged = missing > 0;
    log_reloaded(s->config_path, conf, missing);
}

/* The reload's checker was collected (children_collect): act on it. */
static void reload_checked(struct supervisor *s)
{
    if (!s->check.pid || !s->check.exited)
        return;
    struct daemon_conf *conf;
    char err[800];
    if (reload_check_end(&s->check, &conf, err, sizeof err) < 0)
        reload_refused(s, err);
    else
        reload_apply(s, conf);
}

static void on_reload_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    struct supervisor *s = arg;
    if (!s->stopping)
        reload(s);
}

/* SIGUSR2: the master moved (sentinel_watch.c raises it; an operator may
 * too).  Relayed to every child, whose Sentinel connections then look the
 * master up at once; the supervisor's own connections get it from their
 * own events on this loop. */
static void on_master_moved_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    struct supervisor *s = arg;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s->children[i].role != ROLE_NONE && s->children[i].pid)
            children_signal(s, &s->children[i], SIGUSR2);
}

static void on_sigchld(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    struct supervisor *s = arg;
    children_collect(s);
    if (!s->stopping)
        reload_checked(s);
}

/* ---- set-up -------------------------------------------------------------- */

#define NEVENTS 6

/* The signal events and the timers, added to the loop; -1 after logging. */
static int add_events(struct supervisor *s, struct event **ev)
{
    ev[0] = evsignal_new(s->base, SIGCHLD, on_sigchld, s);
    ev[1] = evsignal_new(s->base, SIGTERM, on_stop_signal, s);
    ev[2] = evsignal_new(s->base, SIGINT, on_stop_signal, s);
    ev[3] = evsignal_new(s->base, SIGHUP, on_reload_signal, s);
    ev[4] = evsignal_new(s->base, SIGUSR2, on_master_moved_signal, s);
    ev[5] = event_new(s->base, -1, EV_PERSIST, on_tick, s);
    const struct timeval tick = { 0, TICK_MS * 1000 };
    for (int i = 0; i < NEVENTS; i++)
        if (!ev[i] || event_add(ev[i], i == 5 ? &tick : NULL) < 0) {
            log_err("cannot set up the event loop (signals and timer)");
            return -1;
        }
    return 0;
}

/* What the supervisor owns besides its generations: the loop, the settle
 * board and its wake pipe, and the memory it shares with its children (the
 * slots, the metrics, the dashboard's history and sessions), mapped before
 * the first fork.  -1 after logging. */
static int set_up(struct supervisor *s)
{
    s->admin_fd = -1;
    s->slots = slots_create(MAX_CHILDREN);
    s->cancels = cancel_board_create(MAX_CHILDREN);
    s->board = settle_board_create();
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        s->wake[0] = s->wake[1] = -1;
        log_err("cannot set up: pipe: %s", strerror(errno));
        return -1;
    }
    s->metrics = metrics_new();
    s->history = ui_history_new();
    s->sessions = ui_auth_store_new();
    s->base = event_base_new();
    if (!s->slots || !s->cancels || !s->board || !s->metrics || !s->history || !s->sessions || !s->base) {
        log_err("cannot set up: %s", s->base ? strerror(errno) : "event_base_new failed");
        return -1;
    }
    return 0;
}

static void tear_down(struct supervisor *s, struct event **ev)
{
    for (int i = 0; i < NEVENTS; i++)
        if (ev[i])
            event_free(ev[i]);
    admin_unlisten(s);
    generation_free(s->cur);    /* first: their connections use the loop */
    for (int g = 0; g < MAX_GENERATIONS; g++)
        generation_free(s->old[g]);
    if (s->base)
        event_base_free(s->base);
    metrics_free(s->metrics);
    ui_history_free(s->history);
    ui_auth_store_free(s->sessions);
    slots_destroy(s->slots, MAX_CHILDREN);
    cancel_board_destroy(s->cancels, MAX_CHILDREN);
    settle_board_destroy(s->board);
    for (int i = 0; i < 2; i++)
        if (s->wake[i] >= 0)
            close(s->wake[i]);
}

int supervisor_run(struct daemon_conf *conf, const char *config_path)
{
    static struct supervisor s;     /* big (the child table); one per process */
    memset(&s, 0, sizeof s);
    s.config_path = config_path;
    s.pid = getpid();
    s.watchdog_ms = notify_watchdog_ms();
    s.wake[0] = s.wake[1] = -1;
    reload_check_init(&s.check);
    struct event *ev[NEVENTS] = { NULL };
    int rc = DAEMON_EXIT_OSERR;
    if (signals_ignore_pipe() < 0 || set_up(&s) < 0)
        goto done;
    if (!(s.cur = generation_new(conf, ++s.last_gen_id))) {
        log_err("cannot set up: out of memory");
        goto done;
    }
    conf = NULL;                    /* the generation's now */
    s.conf_gen = s.cur->id;
    settle_board_set_in_force(s.board, s.cur->id);
    if (admin_listen(&s) < 0)
        goto done;
    draw_nonce(&s);
    if (strays_setup() < 0)
        log_warn("prctl(PR_SET_CHILD_SUBREAPER): %s: processes a dead worker's handler "
                 "started may outlive it", strerror(errno));
    if (add_events(&s, ev) < 0)
        goto done;
    children_start_missing(&s);      /* the table has room for a whole configuration */
    event_base_dispatch(s.base);
    reload_check_cancel(&s.check);
    rc = s.config_refused && !s.stopping ? DAEMON_EXIT_CONFIG : DAEMON_EXIT_OK;
    log_info("stopped");
done:
    tear_down(&s, ev);
    if (conf) {
        dconfig_free(conf);
        free(conf);
    }
    return rc;
}
