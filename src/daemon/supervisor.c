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

#include "daemon/handlers.h"
#include "daemon/http_admin.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/notify.h"
#include "daemon/reaper.h"
#include "daemon/settle.h"
#include "daemon/signals.h"
#include "daemon/slots.h"
#include "daemon/strays.h"
#include "daemon/worker.h"

#define TICK_MS 50
#define MAX_CHILDREN (2 * DCONFIG_MAX_WORKERS + 2)  /* old + new during a reload */
#define MAX_GENERATIONS 8
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
    int queue;                  /* index into conf->queues (workers) */
    struct daemon_conf *conf;   /* the configuration it was started with */
    int retiring;               /* asked to stop; not respawned */
    int64_t started_ms;
    int64_t respawn_at_ms;      /* when pid is 0 */
    int64_t backoff_ms;
    int64_t killed_for_timeout; /* the timeout in ms, when we killed it */
    struct slot_job killed_job; /* the job it was running then */
    struct settler *settler;    /* its configuration's (workers) */
};

struct supervisor {
    struct event_base *base;
    struct daemon_conf *conf;   /* in force */
    struct daemon_conf *old[MAX_GENERATIONS]; /* kept while their children live */
    /* Settlers of dead workers' jobs: [0] is the configuration in force's,
     * the others serve older generations until idle and unused. */
    struct settler *settlers[MAX_GENERATIONS + 1];
    char owner_nonce[17];       /* this run's: names its workers' claims */
    const char *config_path;
    struct worker_slot *slots;
    struct child children[MAX_CHILDREN];
    dq_client *redis;           /* blocking: answers /metrics and /healthz */
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
    dq_close(s->redis);
    for (int g = 0; g <= MAX_GENERATIONS; g++)
        settler_close_in_child(s->settlers[g]);
    srandom((unsigned)getpid() ^ (unsigned)time(NULL));
    char owner[64];
    owner_name(s, getpid(), owner, sizeof owner);
    int rc = c->role == ROLE_REAPER
                 ? reaper_main(c->conf, &s->slots[child_index(s, c)])
                 : worker_main(c->conf, &c->conf->queues[c->queue], &s->slots[child_index(s, c)],
                               owner);
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
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid != 0)
        sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        log_err("fork: %s", strerror(errno));
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

/* Start the workers and the reaper of `conf`, whose dead workers' jobs
 * `settler` settles. */
static int start_generation(struct supervisor *s, struct daemon_conf *conf,
                            struct settler *settler)
{
    for (size_t q = 0; q <= conf->nqueues; q++) {
        int n = q < conf->nqueues ? conf->queues[q].workers : 1;
        for (int i = 0; i < n; i++) {
            struct child *c = free_row(s);
            if (!c) {
                log_err("no room for more children");
                return -1;
            }
            memset(c, 0, sizeof *c);
            c->role = q < conf->nqueues ? ROLE_WORKER : ROLE_REAPER;
            c->queue = (int)q;
            c->conf = conf;
            c->settler = settler;
            spawn(s, c);
        }
    }
    return 0;
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

/* The blocking client that answers scrapes: made on first need, and
 * again after a failure (dq_* calls reconnect a broken one themselves);
 * NULL with the reason in err. */
static dq_client *redis_client(struct supervisor *s, char *err, size_t errlen)
{
    if (s->redis)
        return s->redis;
    dq_options opt;
    redis_conf_to_options(&s->conf->redis, &opt);
    opt.connect_timeout_ms = 1000;
    opt.command_timeout_ms = 2000;
    s->redis = dq_connect(&opt, err, errlen, NULL);
    return s->redis;
}

/* Settle, at once, every job a dead worker held: what it finished, what
 * was running (failed with `cause`), what it had not started, and a claim
 * on its way (settle.h).  A clean exit leaves nothing but its claims'
 * owner record, which this removes. */
static void settle_dead_worker(struct supervisor *s, const struct child *c,
                               const char *cause)
{
    char who[16], owner[64];
    child_name(s, c, who, sizeof who);
    owner_name(s, c->pid, owner, sizeof owner);
    struct settle_req req = { .dc = c->conf, .q = &c->conf->queues[c->queue],
                              .slot = &s->slots[child_index(s, c)], .owner = owner,
                              .cause = cause, .who = who };
    settler_settle(c->settler, &req);
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
        metrics_count_timeout(s->metrics, c->conf->queues[c->queue].name, job.type);
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
    metrics_fold_slot(s->metrics, c->role == ROLE_WORKER ? c->conf->queues[c->queue].name
                                                         : NULL, &s->slots[child_index(s, c)]);
    int made_progress = slot_get(&s->slots[child_index(s, c)].jobs_done) > 0;
    slot_reset(&s->slots[child_index(s, c)]);
    c->pid = 0;
    if (c->retiring || s->stopping) {
        c->role = ROLE_NONE;
        return;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == WORKER_EXIT_CONFIG) {
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
        kill(c->pid, SIGKILL);
    }
}

static int live_children(const struct supervisor *s)
{
    int n = 0;
    for (int i = 0; i < MAX_CHILDREN; i++)
        n += s->children[i].role != ROLE_NONE && s->children[i].pid != 0;
    return n;
}

static int settler_in_use(const struct supervisor *s, const struct settler *st)
{
    if (!settler_idle(st))
        return 1;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s->children[i].role != ROLE_NONE && s->children[i].settler == st)
            return 1;
    return 0;
}

/* Free the configurations no child runs any more, and the settlers of
 * older generations once no child uses them and they have finished. */
static void drop_old_generations(struct supervisor *s)
{
    for (int g = 1; g <= MAX_GENERATIONS; g++)
        if (s->settlers[g] && !settler_in_use(s, s->settlers[g])) {
            settler_free(s->settlers[g]);
            s->settlers[g] = NULL;
        }
    for (int g = 0; g < MAX_GENERATIONS; g++) {
        if (!s->old[g])
            continue;
        int used = 0;
        for (int i = 0; i < MAX_CHILDREN; i++)
            used |= s->children[i].role != ROLE_NONE && s->children[i].conf == s->old[g];
        if (!used) {
            dconfig_free(s->old[g]);
            free(s->old[g]);
            s->old[g] = NULL;
        }
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
        if (c->role == ROLE_WORKER && c->conf == s->conf && !c->retiring
            && (!c->pid || !s->slots[i].ready))
            return;
    }
    /* The log line first: whoever sees READY=1 finds it in the log. */
    log_info("ready: every worker is connected and claiming");
    notify_send("READY=1");
    s->ready_sent = 1;
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
        int settling = 0;
        for (int g = 0; g <= MAX_GENERATIONS; g++)
            settling |= !settler_idle(s->settlers[g]);
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
                    kill(s->children[i].pid, SIGKILL);
            s->stop_deadline_ms = now + 60000;
        }
        return;
    }
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        if (c->role != ROLE_NONE && !c->pid && c->respawn_at_ms && now >= c->respawn_at_ms)
            spawn(s, c);
    }
    if (s->config_refused && live_children(s) == 0) {
        log_err("no worker can run with this configuration: exiting");
        event_base_loopbreak(s->base);
    }
}

/* ---- metrics and health (metrics.c writes them, http_admin.c serves) ---- */

/* What a request sees of the supervisor; `rows` has MAX_CHILDREN entries. */
static void view_of(struct supervisor *s, struct metrics_child *rows, struct metrics_view *v,
                    char *err, size_t errlen)
{
    size_t n = 0;
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        if (c->role == ROLE_NONE)
            continue;
        rows[n] = (struct metrics_child){
            .queue = c->role == ROLE_WORKER ? c->conf->queues[c->queue].name : NULL,
            .slot = &s->slots[i], .running = c->pid != 0,
            .in_force = c->role == ROLE_WORKER && c->conf == s->conf && !c->retiring };
        n++;
    }
    *v = (struct metrics_view){ .children = rows, .nchildren = n, .conf = s->conf,
                                .redis = redis_client(s, err, errlen), .redis_err = err,
                                .stopping = s->stopping };
}

/* Answer /metrics (health 0) or /healthz (health 1); returns the status. */
static int answer(struct supervisor *s, FILE *out, int health)
{
    struct metrics_child rows[MAX_CHILDREN];
    struct metrics_view v;
    char err[300] = "";
    view_of(s, rows, &v, err, sizeof err);
    return health ? metrics_health(&v, out) : metrics_write(s->metrics, &v, out);
}

static int on_metrics(FILE *out, void *arg)
{
    return answer(arg, out, 0);
}

static int on_healthz(FILE *out, void *arg)
{
    return answer(arg, out, 1);
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
    const struct daemon_conf *dc = s->conf;
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
            kill(c->pid, SIGTERM);
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
             (long long)s->conf->shutdown_timeout_ms);
    s->stopping = 1;
    notify_send("STOPPING=1");
    s->stop_deadline_ms = slots_now_ms() + s->conf->shutdown_timeout_ms;
    ask_to_stop(s, 0);
}

static int keep_generation(struct supervisor *s, struct daemon_conf *conf)
{
    for (int g = 0; g < MAX_GENERATIONS; g++)
        if (!s->old[g]) {
            s->old[g] = conf;
            return 0;
        }
    return -1;
}

/* SIGHUP: build the new configuration first; if it fails, keep the old
 * one.  Otherwise the old children finish the job in hand and give back
 * the rest of their batch while new ones start, so no job is lost or run
 * twice. */
static void on_reload_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    struct supervisor *s = arg;
    if (s->stopping)
        return;
    char err[800];
    if (s->ready_sent)
        notify_send("RELOADING=1");
    struct handler_table t;
    struct daemon_conf *conf = handlers_load_config(s->config_path, &t, err, sizeof err);
    if (conf)
        handlers_close(&t);     /* checked; each worker opens its own */
    if (s->ready_sent)
        notify_send("READY=1");
    if (!conf) {
        log_err("reload refused: %s; the configuration in force stays", err);
        return;
    }
    int free_settler = 1;
    while (free_settler <= MAX_GENERATIONS && s->settlers[free_settler])
        free_settler++;
    struct settler *settler = free_settler <= MAX_GENERATIONS
                                  ? settler_new(s->base, conf, s->metrics) : NULL;
    if (!settler || keep_generation(s, s->conf) < 0) {
        log_err("reload refused: too many reloads still draining");
        settler_free(settler);
        dconfig_free(conf);
        free(conf);
        return;
    }
    /* The new configuration's settler goes first; the old one serves its
     * workers until they are gone. */
    s->settlers[free_settler] = s->settlers[0];
    s->settlers[0] = settler;
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s->children[i].role != ROLE_NONE)
            s->children[i].retiring = 1;
    ask_to_stop(s, 1);
    s->conf = conf;
    s->config_refused = 0;
    log_set_level(conf->log_level);
    metrics_listen(s);
    start_generation(s, conf, settler);
    log_info("reloaded %s: %zu queue%s, %zu handler%s", s->config_path, conf->nqueues,
             conf->nqueues == 1 ? "" : "s", conf->nhandlers, conf->nhandlers == 1 ? "" : "s");
}

static void on_sigchld(evutil_socket_t sig, short what, void *arg)
{
    (void)sig;
    (void)what;
    collect_children(arg);
}

/* ---- set-up -------------------------------------------------------------- */

int supervisor_run(struct daemon_conf *conf, const char *config_path)
{
    static struct supervisor s;     /* big (the child table); one per process */
    memset(&s, 0, sizeof s);
    s.conf = conf;
    s.config_path = config_path;
    s.pid = getpid();
    s.watchdog_ms = notify_watchdog_ms();
    signals_ignore_pipe();
    s.slots = slots_create(MAX_CHILDREN);
    s.base = event_base_new();
    if (!s.slots || !s.base) {
        log_err("cannot set up: %s", strerror(errno));
        return 71;
    }
    s.metrics = metrics_new();
    s.http = http_admin_new(s.base, admin_routes, 2, &s);
    if (!s.metrics || !s.http) {
        log_err("cannot set up: out of memory");
        return 71;
    }
    if (metrics_listen(&s) < 0)
        return 71;
    draw_nonce(&s);
    s.settlers[0] = settler_new(s.base, conf, s.metrics);
    if (!s.settlers[0]) {
        log_err("cannot set up: out of memory");
        return 71;
    }
    if (strays_setup() < 0)
        log_warn("prctl(PR_SET_CHILD_SUBREAPER): %s: processes a dead worker's handler "
                 "started may outlive it", strerror(errno));
    struct event *ev[5] = {
        evsignal_new(s.base, SIGCHLD, on_sigchld, &s),
        evsignal_new(s.base, SIGTERM, on_stop_signal, &s),
        evsignal_new(s.base, SIGINT, on_stop_signal, &s),
        evsignal_new(s.base, SIGHUP, on_reload_signal, &s),
        event_new(s.base, -1, EV_PERSIST, on_tick, &s),
    };
    for (int i = 0; i < 5; i++)
        if (!ev[i]) {
            log_err("cannot set up the event loop");
            return 71;
        }
    for (int i = 0; i < 4; i++)
        event_add(ev[i], NULL);
    struct timeval tick = { 0, TICK_MS * 1000 };
    event_add(ev[4], &tick);
    start_generation(&s, conf, s.settlers[0]);
    event_base_dispatch(s.base);
    int rc = s.config_refused && !s.stopping ? 78 : 0;
    log_info("stopped");
    for (int i = 0; i < 5; i++)
        event_free(ev[i]);
    http_admin_free(s.http);
    for (int g = 0; g <= MAX_GENERATIONS; g++)
        settler_free(s.settlers[g]);
    event_base_free(s.base);
    metrics_free(s.metrics);
    dq_close(s.redis);
    dconfig_free(s.conf);
    free(s.conf);
    for (int g = 0; g < MAX_GENERATIONS; g++)
        if (s.old[g]) {
            dconfig_free(s.old[g]);
            free(s.old[g]);
        }
    slots_destroy(s.slots, MAX_CHILDREN);
    return rc;
}
