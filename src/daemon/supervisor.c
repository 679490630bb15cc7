#include "daemon/supervisor.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/exitcodes.h"
#include "daemon/generation.h"
#include "daemon/handlers.h"
#include "daemon/http_admin.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/notify.h"
#include "daemon/reaper.h"
#include "daemon/signals.h"
#include "daemon/slots.h"
#include "daemon/strays.h"
#include "daemon/worker.h"

#define TICK_MS 50
/* Rows for two full generations (old and new during a reload).  More
 * generations may drain at once after reloads in a row: the rows the
 * configuration in force still lacks are then taken as old children exit
 * (start_missing). */
#define MAX_CHILDREN (2 * DCONFIG_MAX_WORKERS + 2)
#define MAX_GENERATIONS 8       /* older ones draining; a reload waits for room */
#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS 10000   /* a crash loop costs one fork per 10 s at most */
#define HEALTHY_AFTER_MS 10000  /* a child that lived this long resets its backoff */
#define RESPAWN_MIN_MS 100      /* even a healthy child's restart: a death is seen
                                   (/healthz, a scrape) and a kill storm is paced */
#define SETTLE_WAIT_MS 5000     /* at a stop, wait this long for settlements */

enum child_role { ROLE_NONE, ROLE_WORKER, ROLE_REAPER };

/* One row of the child table (nginx's ngx_processes).  Row i uses slot i. */
struct child {
    enum child_role role;
    pid_t pid;                  /* 0: not running (waiting to respawn) */
    int queue;                  /* index into gen->conf->queues (workers) */
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
    struct metrics *metrics;    /* totals of exited children, own counts */
    struct http_admin *http;    /* /metrics and /healthz */
};

static int child_index(const struct supervisor *s, const struct child *c)
{
    return (int)(c - s->children);
}

static void child_name(const struct supervisor *s, const struct child *c, char *buf,
                       size_t len)
{
    if (c->role == ROLE_REAPER)
        snprintf(buf, len, "reap");
    else
        snprintf(buf, len, "w%d", child_index(s, c));
}

/* Send `sig` to a child; a child already gone (ESRCH: it exited and its
 * SIGCHLD is on its way) is not an error.  Any other failure is logged:
 * a child the supervisor cannot stop must not go unnoticed. */
static void signal_child(const struct supervisor *s, const struct child *c, int sig)
{
    if (kill(c->pid, sig) == 0 || errno == ESRCH)
        return;
    char name[16];
    child_name(s, c, name, sizeof name);
    log_err("%s: kill(%d, %s): %s", name, (int)c->pid, strsignal(sig), strerror(errno));
}

/* ---- starting children -------------------------------------------------- */

/* The name a worker's claims carry (claim's owner): unique among every
 * delayqd process on the queue, since the nonce is drawn at each start. */
static void owner_name(const struct supervisor *s, pid_t pid, char *buf, size_t len)
{
    snprintf(buf, len, "%s.%d", s->owner_nonce, (int)pid);
}

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

/* In the child: drop what belongs to the supervisor, then run the role.
 * Never returns. */
static void become_child(struct supervisor *s, struct child *c)
{
    char name[16];
    child_name(s, c, name, sizeof name);
    log_set_role(name);
    if (signals_child_setup(s->pid) < 0)
        _exit(0);
    http_admin_close_in_child(s->http); /* the metrics port is the supervisor's */
    /* The parent's connections: close our copies of the sockets; the
     * parent's event base is left alone (freeing it would touch the shared
     * epoll). */
    generation_close_in_child(s->cur);
    for (int g = 0; g < MAX_GENERATIONS; g++)
        generation_close_in_child(s->old[g]);
    srandom((unsigned)getpid() ^ (unsigned)time(NULL));
    char owner[64];
    owner_name(s, getpid(), owner, sizeof owner);
    const struct daemon_conf *dc = c->gen->conf;
    int rc = c->role == ROLE_REAPER
                 ? reaper_main(dc, &s->slots[child_index(s, c)])
                 : worker_main(dc, &dc->queues[c->queue], &s->slots[child_index(s, c)], owner);
    _exit(rc);
}

static int spawn(struct supervisor *s, struct child *c)
{
    slot_reset(&s->slots[child_index(s, c)]);
    fflush(NULL);
    /* Signals stay blocked across fork until the child has its own
     * handlers: a SIGTERM arriving in between would otherwise run libevent's
     * handler inherited from the supervisor, notify the supervisor's loop
     * through the shared socketpair and leave the child running. */
    sigset_t all, old;
    sigfillset(&all);
    if (sigprocmask(SIG_BLOCK, &all, &old) < 0) {
        log_err("sigprocmask: %s: not starting a child now", strerror(errno));
        c->respawn_at_ms = slots_now_ms() + BACKOFF_FIRST_MS;
        return -1;
    }
    pid_t pid = fork();
    int fork_errno = errno;
    if (pid != 0 && sigprocmask(SIG_SETMASK, &old, NULL) < 0)
        log_err("sigprocmask (restoring the mask after fork): %s", strerror(errno));
    if (pid < 0) {
        log_err("fork: %s", strerror(fork_errno));
        c->respawn_at_ms = slots_now_ms() + BACKOFF_FIRST_MS;
        return -1;
    }
    if (pid == 0)
        become_child(s, c);
    c->pid = pid;
    c->started_ms = slots_now_ms();
    c->respawn_at_ms = 0;
    c->killed_for_timeout = 0;
    return 0;
}

static struct child *free_row(struct supervisor *s)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s->children[i].role == ROLE_NONE)
            return &s->children[i];
    return NULL;
}

/* Rows the configuration in force has for queue `q` (nqueues: the
 * reaper), running or waiting to respawn. */
static int rows_of(const struct supervisor *s, size_t q)
{
    int n = 0;
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        n += c->role != ROLE_NONE && c->gen == s->cur && !c->retiring && c->queue == (int)q;
    }
    return n;
}

/*
 * Give the configuration in force every child it asks for that has no row
 * yet (its workers per queue and its reaper): all of them at start and
 * after a reload, and, when reloads in a row left old children draining in
 * most rows, the rest as those exit (from the tick).  Returns how many
 * still lack a row.
 */
static int start_missing(struct supervisor *s)
{
    const struct daemon_conf *dc = s->cur->conf;
    int missing = 0;
    for (size_t q = 0; q <= dc->nqueues; q++) {
        int want = q < dc->nqueues ? dc->queues[q].workers : 1;
        for (int n = rows_of(s, q); n < want; n++) {
            struct child *c = free_row(s);
            if (!c) {
                missing += want - n;
                break;
            }
            memset(c, 0, sizeof *c);
            c->role = q < dc->nqueues ? ROLE_WORKER : ROLE_REAPER;
            c->queue = (int)q;
            c->gen = s->cur;
            spawn(s, c);
        }
    }
    return missing;
}

/* ---- children that died ------------------------------------------------- */

static void describe_status(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
}

/* Settle, at once, every job a dead worker held: what it finished, what
 * was running (failed with `cause`), what it had not started, and a claim
 * on its way (settle.h), on its generation's connection.  A clean exit
 * leaves nothing but its claims' owner record, which this removes. */
static void settle_dead_worker(struct supervisor *s, const struct child *c,
                               const char *cause)
{
    char who[16], owner[64];
    child_name(s, c, who, sizeof who);
    owner_name(s, c->pid, owner, sizeof owner);
    const struct daemon_conf *dc = c->gen->conf;
    struct settle_req req = { .dc = dc, .q = &dc->queues[c->queue],
                              .slot = &s->slots[child_index(s, c)], .owner = owner,
                              .cause = cause, .who = who };
    settler_settle(c->gen->settler, &req);
}

static int is_child_row(pid_t pid, void *arg)
{
    const struct supervisor *s = arg;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s->children[i].role != ROLE_NONE && s->children[i].pid == pid)
            return 1;
    return 0;
}

/* Why a worker's running job failed when it died. */
static void death_cause(const struct child *c, int status, char *buf, size_t len)
{
    if (c->killed_for_timeout)
        snprintf(buf, len, "timeout after %lld ms", (long long)c->killed_for_timeout);
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "worker died: signal %d", WTERMSIG(status));
    else
        snprintf(buf, len, "worker died: exit status %d", WEXITSTATUS(status));
}

/* The worker's queue name; NULL for the reaper. */
static const char *queue_of(const struct child *c)
{
    return c->role == ROLE_WORKER ? c->gen->conf->queues[c->queue].name : NULL;
}

static void on_child_exit(struct supervisor *s, struct child *c, int status)
{
    char name[16], how[96];
    child_name(s, c, name, sizeof name);
    describe_status(status, how, sizeof how);
    struct slot_job job;
    int had_job = 0;
    if (c->killed_for_timeout) {
        job = c->killed_job;
        had_job = 1;
        metrics_count_timeout(s->metrics, queue_of(c), job.type);
    } else if (c->role == ROLE_WORKER) {
        had_job = slot_read_job(&s->slots[child_index(s, c)], &job);
    }
    int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!clean || had_job)
        log_warn("%s (pid %d) %s%s%s", name, (int)c->pid, how,
                 had_job ? " while running job " : "", had_job ? job.id : "");
    if (c->role == ROLE_WORKER) {
        char cause[128];
        death_cause(c, status, cause, sizeof cause);
        settle_dead_worker(s, c, cause);
    }
    /* Its handler's programs die with it (strays.h). */
    int strays = strays_kill(is_child_row, s);
    if (strays > 0)
        log_warn("%s: stopped %d process%s its handler had started", name, strays,
                 strays == 1 ? "" : "es");
    /* Keep its counts before the row's slot is reused. */
    metrics_fold_slot(s->metrics, queue_of(c), &s->slots[child_index(s, c)]);
    int made_progress = slot_get(&s->slots[child_index(s, c)].jobs_done) > 0;
    slot_reset(&s->slots[child_index(s, c)]);
    c->pid = 0;
    if (c->retiring || s->stopping) {
        c->role = ROLE_NONE;
        return;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == DAEMON_EXIT_CONFIG) {
        log_err("%s cannot start with this configuration: not restarting it", name);
        c->role = ROLE_NONE;
        s->config_refused = 1;
        return;
    }
    /* A child that ran jobs, or lived a while, is not crash-looping: a
     * handler that crashes on one job must not slow the queue down. */
    int64_t lived = slots_now_ms() - c->started_ms;
    c->backoff_ms = lived >= HEALTHY_AFTER_MS || made_progress ? 0
                    : (c->backoff_ms ? c->backoff_ms * 2 : BACKOFF_FIRST_MS);
    if (c->backoff_ms > BACKOFF_MAX_MS)
        c->backoff_ms = BACKOFF_MAX_MS;
    c->respawn_at_ms = slots_now_ms()
                       + (c->backoff_ms > RESPAWN_MIN_MS ? c->backoff_ms : RESPAWN_MIN_MS);
    metrics_count_restart(s->metrics);
    if (c->backoff_ms)
        log_info("%s restarting in %lldms", name, (long long)c->backoff_ms);
}

/* waitpid until nothing is left to collect (several children may have
 * died for one SIGCHLD). */
static void collect_children(struct supervisor *s)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        for (int i = 0; i < MAX_CHILDREN; i++)
            if (s->children[i].role != ROLE_NONE && s->children[i].pid == pid) {
                on_child_exit(s, &s->children[i], status);
                break;
            }
    }
}

/* ---- the tick: timeouts, respawns, shutdown ----------------------------- */

static void check_timeouts(struct supervisor *s, int64_t now)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        struct slot_job job;
        if (c->role != ROLE_WORKER || !c->pid || c->killed_for_timeout
            || !slot_read_job(&s->slots[i], &job) || job.timeout_ms <= 0
            || now - job.started_ms <= job.timeout_ms)
            continue;
        log_warn("w%d: job %s (type %s) overran its timeout of %lldms: stopping the worker",
                 i, job.id, job.type, (long long)job.timeout_ms);
        c->killed_for_timeout = job.timeout_ms;
        c->killed_job = job;
        signal_child(s, c, SIGKILL);
    }
}

static int live_children(const struct supervisor *s)
{
    int n = 0;
    for (int i = 0; i < MAX_CHILDREN; i++)
        n += s->children[i].role != ROLE_NONE && s->children[i].pid != 0;
    return n;
}

static int generation_in_use(const struct supervisor *s, const struct generation *g)
{
    if (!generation_idle(g))
        return 1;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s->children[i].role != ROLE_NONE && s->children[i].gen == g)
            return 1;
    return 0;
}

/* Free the older generations once no child runs with them and their
 * settler has finished. */
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

/* Respawns, the children the configuration in force still lacks, and a
 * reload that waited for room. */
static void keep_children(struct supervisor *s, int64_t now)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        if (c->role != ROLE_NONE && !c->pid && c->respawn_at_ms && now >= c->respawn_at_ms)
            spawn(s, c);
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
    int missing = start_missing(s);
    if (missing == 0 && s->missing_logged) {
        log_info("every child of the configuration in force runs again");
        s->missing_logged = 0;
    }
}

/* Stopping: wait for the children, then for the settlers; kill what is
 * left at the deadline. */
static void drain(struct supervisor *s, int64_t now)
{
    int settling = !generation_idle(s->cur);
    for (int g = 0; g < MAX_GENERATIONS; g++)
        settling |= s->old[g] && !generation_idle(s->old[g]);
    if (live_children(s) == 0 && (!settling || now >= s->settle_deadline_ms)) {
        event_base_loopbreak(s->base);
        return;
    }
    if (live_children(s) == 0) {
        if (!s->settle_deadline_ms)
            s->settle_deadline_ms = now + SETTLE_WAIT_MS;
        return;
    }
    if (now >= s->stop_deadline_ms) {
        log_warn("shutdown timeout: killing %d child%s", live_children(s),
                 live_children(s) == 1 ? "" : "ren");
        for (int i = 0; i < MAX_CHILDREN; i++)
            if (s->children[i].role != ROLE_NONE && s->children[i].pid)
                signal_child(s, &s->children[i], SIGKILL);
        s->stop_deadline_ms = now + 60000;
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct supervisor *s = arg;
    int64_t now = slots_now_ms();
    collect_children(s);
    check_timeouts(s, now);
    drop_old_generations(s);
    notify_progress(s, now);
    if (s->stopping) {
        drain(s, now);
        return;
    }
    keep_children(s, now);
    if (s->config_refused && live_children(s) == 0) {
        log_err("no worker can run with this configuration: exiting");
        event_base_loopbreak(s->base);
    }
}

/* ---- metrics and health (metrics.c writes them, http_admin.c serves) ---- */

/* Answer /metrics (health 0) or /healthz (health 1) from the supervisor's
 * state and the cached statistics (never from Redis); returns the status. */
static int answer(struct supervisor *s, FILE *out, struct http_admin_header *extra,
                  int health)
{
    struct metrics_child rows[MAX_CHILDREN];
    size_t n = 0;
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        if (c->role == ROLE_NONE)
            continue;
        rows[n++] = (struct metrics_child){
            .queue = queue_of(c), .slot = &s->slots[i], .running = c->pid != 0,
            .in_force = c->role == ROLE_WORKER && c->gen == s->cur && !c->retiring };
    }
    struct qstats_view stats;
    if (s->cur->stats)
        qstats_read(s->cur->stats, &stats);
    else
        stats = (struct qstats_view){ .age_ms = -1, .why = "statistics not refreshed" };
    if (stats.age_ms >= 0) {
        snprintf(extra->name, sizeof extra->name, "X-Delayq-Stats-Age");
        snprintf(extra->value, sizeof extra->value, "%.3f", (double)stats.age_ms / 1000.0);
    }
    struct metrics_view v = { .children = rows, .nchildren = n, .conf = s->cur->conf,
                              .stats = &stats, .stopping = s->stopping };
    return health ? metrics_health(&v, out) : metrics_write(s->metrics, &v, out);
}

static int on_metrics(FILE *out, struct http_admin_header *extra, void *arg)
{
    return answer(arg, out, extra, 0);
}

static int on_healthz(FILE *out, struct http_admin_header *extra, void *arg)
{
    return answer(arg, out, extra, 1);
}

static const struct http_admin_route admin_routes[] = {
    { "/metrics", "text/plain; version=0.0.4; charset=utf-8", on_metrics },
    { "/healthz", "text/plain; charset=utf-8", on_healthz },
};

/* Serve /metrics and /healthz where the configuration in force says: at
 * start, and on reload (move, or stop).  -1 after logging why the address
 * cannot be bound; a reload then keeps the previous one. */
static int metrics_listen(struct supervisor *s)
{
    const struct daemon_conf *dc = s->cur->conf;
    char err[300];
    if (!dc->metrics_listen) {
        if (http_admin_fd(s->http) >= 0)
            log_info("metrics: no longer served");
        http_admin_unlisten(s->http);
        return 0;
    }
    int had = http_admin_fd(s->http) >= 0;
    int rc = http_admin_listen(s->http, (const struct sockaddr *)&dc->metrics_addr,
                               dc->metrics_addrlen, err, sizeof err);
    if (rc < 0)
        log_err("metrics: cannot listen on %s: %s%s", dc->metrics_listen, err,
                had ? "; still serving on the previous address" : "");
    else if (rc > 0)
        log_info("metrics: serving /metrics and /healthz on http://%s", dc->metrics_listen);
    return rc < 0 ? -1 : 0;
}

/* ---- signals ------------------------------------------------------------- */

static void ask_to_stop(struct supervisor *s, int retiring_only)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        if (c->role == ROLE_NONE || (retiring_only && !c->retiring))
            continue;
        if (c->pid)
            signal_child(s, c, SIGTERM);
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

/*
 * Build the new generation first (configuration, handlers checked, its
 * settler and statistics); if that fails, keep the one in force.
 * Otherwise swap: the old children finish the job in hand and give back
 * the rest of their batch while the new ones start, so no job is lost or
 * run twice.  With MAX_GENERATIONS still draining the reload waits (the
 * tick runs it once one is gone), so no SIGHUP is lost either.
 */
static void reload(struct supervisor *s)
{
    int place = free_old_place(s);
    if (place < 0) {
        if (!s->reload_pending)
            log_warn("reload: %d earlier configurations still draining; reloading once "
                     "one is gone", MAX_GENERATIONS);
        s->reload_pending = 1;
        return;
    }
    char err[800];
    if (s->ready_sent)
        notify_send("RELOADING=1");
    struct handler_table t;
    struct daemon_conf *conf = handlers_load_config(s->config_path, &t, err, sizeof err);
    if (conf)
        handlers_close(&t);     /* checked; each worker opens its own */
    struct generation *g = conf ? generation_new(s->base, conf, s->metrics) : NULL;
    if (s->ready_sent)
        notify_send("READY=1");
    if (!conf) {
        log_err("reload refused: %s; the configuration in force stays", err);
        return;
    }
    if (!g) {
        log_err("reload refused: out of memory; the configuration in force stays");
        dconfig_free(conf);
        free(conf);
        return;
    }
    generation_retire(s->cur);
    s->old[place] = s->cur;
    s->cur = g;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s->children[i].role != ROLE_NONE)
            s->children[i].retiring = 1;
    ask_to_stop(s, 1);
    s->config_refused = 0;
    log_set_level(conf->log_level);
    metrics_listen(s);
    int missing = start_missing(s);
    s->missing_logged = missing > 0;
    if (missing > 0)
        log_warn("reloaded %s: %zu queue%s, %zu handler%s; %d child%s start as the "
                 "previous configuration's exit", s->config_path, conf->nqueues,
                 conf->nqueues == 1 ? "" : "s", conf->nhandlers, conf->nhandlers == 1 ? "" : "s",
                 missing, missing == 1 ? "" : "ren");
    else
        log_info("reloaded %s: %zu queue%s, %zu handler%s", s->config_path, conf->nqueues,
                 conf->nqueues == 1 ? "" : "s", conf->nhandlers,
                 conf->nhandlers == 1 ? "" : "s");
}

static void on_reload_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    struct supervisor *s = arg;
    if (!s->stopping)
        reload(s);
}

static void on_sigchld(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    collect_children(arg);
}

/* ---- set-up -------------------------------------------------------------- */

#define NEVENTS 5

/* The signal events and the tick, added to the loop; -1 after logging. */
static int add_events(struct supervisor *s, struct event **ev)
{
    ev[0] = evsignal_new(s->base, SIGCHLD, on_sigchld, s);
    ev[1] = evsignal_new(s->base, SIGTERM, on_stop_signal, s);
    ev[2] = evsignal_new(s->base, SIGINT, on_stop_signal, s);
    ev[3] = evsignal_new(s->base, SIGHUP, on_reload_signal, s);
    ev[4] = event_new(s->base, -1, EV_PERSIST, on_tick, s);
    struct timeval tick = { 0, TICK_MS * 1000 };
    for (int i = 0; i < NEVENTS; i++)
        if (!ev[i] || event_add(ev[i], i == NEVENTS - 1 ? &tick : NULL) < 0) {
            log_err("cannot set up the event loop (signals and timer)");
            return -1;
        }
    return 0;
}

/* What the supervisor owns besides its generations: the slots, the loop,
 * the metrics and the admin server.  -1 after logging. */
static int set_up(struct supervisor *s)
{
    s->slots = slots_create(MAX_CHILDREN);
    s->base = event_base_new();
    if (!s->slots || !s->base) {
        log_err("cannot set up: %s", strerror(errno));
        return -1;
    }
    s->metrics = metrics_new();
    s->http = http_admin_new(s->base, admin_routes, 2, s);
    if (!s->metrics || !s->http) {
        log_err("cannot set up: out of memory");
        return -1;
    }
    return 0;
}

static void tear_down(struct supervisor *s, struct event **ev)
{
    for (int i = 0; i < NEVENTS; i++)
        if (ev[i])
            event_free(ev[i]);
    http_admin_free(s->http);
    generation_free(s->cur);    /* first: their connections use the loop */
    for (int g = 0; g < MAX_GENERATIONS; g++)
        generation_free(s->old[g]);
    if (s->base)
        event_base_free(s->base);
    metrics_free(s->metrics);
    slots_destroy(s->slots, MAX_CHILDREN);
}

int supervisor_run(struct daemon_conf *conf, const char *config_path)
{
    static struct supervisor s;     /* big (the child table); one per process */
    memset(&s, 0, sizeof s);
    s.config_path = config_path;
    s.pid = getpid();
    s.watchdog_ms = notify_watchdog_ms();
    signals_ignore_pipe();
    struct event *ev[NEVENTS] = { NULL };
    int rc = DAEMON_EXIT_OSERR;
    if (set_up(&s) < 0)
        goto done;
    if (!(s.cur = generation_new(s.base, conf, s.metrics))) {
        log_err("cannot set up: out of memory");
        goto done;
    }
    conf = NULL;                    /* the generation's now */
    if (metrics_listen(&s) < 0)
        goto done;
    draw_nonce(&s);
    if (strays_setup() < 0)
        log_warn("prctl(PR_SET_CHILD_SUBREAPER): %s: processes a dead worker's handler "
                 "started may outlive it", strerror(errno));
    if (add_events(&s, ev) < 0)
        goto done;
    start_missing(&s);      /* the table has room for a whole configuration */
    event_base_dispatch(s.base);
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
