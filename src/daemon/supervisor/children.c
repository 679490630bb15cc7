/*
 * The supervisor's child table (nginx's ngx_processes): starting workers,
 * the reaper, the settler and the admin process in their rows, and, when
 * one dies, posting the jobs it held for its settler (settle_side.c),
 * killing what its handler left behind, and planning its restart with a
 * backoff that only a crash loop pays.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "daemon/exitcodes.h"
#include "daemon/admin/admin_main.h"
#include "daemon/log.h"
#include "daemon/admin/metrics.h"
#include "daemon/reaper/reaper.h"
#include "daemon/dconfig_sources.h"
#include "daemon/relay/relay.h"
#include "daemon/settler/settler.h"
#include "daemon/signals.h"
#include "daemon/supervisor/strays.h"
#include "daemon/supervisor/supervisor_int.h"
#include "daemon/worker/worker.h"

#define BACKOFF_FIRST_MS 500
#define BACKOFF_MAX_MS 10000   /* a crash loop costs one fork per 10 s at most */
#define HEALTHY_AFTER_MS 10000  /* a child that lived this long resets its backoff */
#define RESPAWN_MIN_MS 100      /* even a healthy child's restart: a death is seen
                                   (/healthz, a scrape) and a kill storm is paced */

static int child_index(const struct supervisor *s, const struct child *c)
{
    return (int)(c - s->children);
}

static void child_name(const struct supervisor *s, const struct child *c, char *buf,
                       size_t len)
{
    if (c->role == ROLE_REAPER)
        snprintf(buf, len, "reap");
    else if (c->role == ROLE_ADMIN)
        snprintf(buf, len, "admin");
    else if (c->role == ROLE_SETTLER)
        snprintf(buf, len, "settle");
    else if (c->role == ROLE_RELAY)
        snprintf(buf, len, "relay%u", (unsigned)(c->queue - (int)c->gen->conf->nqueues - 2) % 100u);
    else
        snprintf(buf, len, "w%d", child_index(s, c));
}

/* Send `sig` to a child; a child already gone (ESRCH: it exited and its
 * SIGCHLD is on its way) is not an error.  Any other failure is logged:
 * a child the supervisor cannot stop must not go unnoticed. */
void children_signal(const struct supervisor *s, const struct child *c, int sig)
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

/* A rank for worker `c` (0 ..): the lowest that no other row of the same
 * queue and configuration generation holds, so that the queue's workers
 * have distinct ranks, and so distinct home partitions, even when a reload
 * fills the rows out of order. */
static unsigned worker_rank(const struct supervisor *s, const struct child *c)
{
    for (unsigned rank = 0;; rank++) {
        int taken = 0;
        for (int i = 0; i < MAX_CHILDREN && !taken; i++) {
            const struct child *o = &s->children[i];
            taken = o != c && o->role == ROLE_WORKER && o->gen == c->gen
                    && o->queue == c->queue && o->rank == rank;
        }
        if (!taken)
            return rank;
    }
}

void children_leave_supervisor(struct supervisor *s, const char *role, int64_t orphan_exit_ms,
                               int keeps_admin_socket)
{
    log_set_role(role);
    /* Before the set-up unblocks signals: a SIGTERM of PR_SET_PDEATHSIG
     * that comes at once must find the bound. */
    signals_set_orphan_exit_ms(orphan_exit_ms);
    int sig = signals_child_setup(s->pid);
    if (sig == -1)
        _exit(0);
    if (sig < 0)
        _exit(DAEMON_EXIT_SOFTWARE);
    /* Only the admin process accepts on the admin socket.  The parent
     * holds no other connection; its event base is left alone (freeing it
     * would touch the shared epoll). */
    if (!keeps_admin_socket && s->admin_fd >= 0)
        close(s->admin_fd);
}

/* In the child: drop what belongs to the supervisor, then run the role.
 * Never returns. */
static void become_child(struct supervisor *s, struct child *c)
{
    char name[16];
    child_name(s, c, name, sizeof name);
    children_leave_supervisor(s, name, c->gen->conf->shutdown_timeout_ms,
                              c->role == ROLE_ADMIN);
    srandom((unsigned)getpid() ^ (unsigned)time(NULL));
    char owner[64];
    owner_name(s, getpid(), owner, sizeof owner);
    /* The settle board's wake pipe is the settlers' only. */
    if (c->role != ROLE_SETTLER)
        close(s->wake[0]);
    close(s->wake[1]);
    const struct daemon_conf *dc = c->gen->conf;
    struct worker_slot *slot = &s->slots[child_index(s, c)];
    int rc;
    if (c->role == ROLE_ADMIN) {
        struct admin_args a = { .dc = dc, .conf_gen = c->gen->id,
                                .listen_fd = s->admin_fd, .slots = s->slots,
                                .nslots = MAX_CHILDREN,
                                .metrics = s->metrics, .history = s->history,
                                .sessions = s->sessions,
                                .parent = s->pid };
        rc = admin_main(&a);
    } else if (c->role == ROLE_REAPER) {
        struct reaper_args a = { .dc = dc, .slot = slot, .slots = s->slots,
                                 .cancels = s->cancels, .n = MAX_CHILDREN };
        rc = reaper_main(&a);
    } else if (c->role == ROLE_SETTLER) {
        rc = settler_main(dc, c->gen->id, s->board, s->wake[0], slot);
    } else if (c->role == ROLE_RELAY) {
#ifdef HAVE_LIBPQ
        rc = relay_main(dc, (size_t)(c->queue - (int)dc->nqueues - 2), slot);
#else
        log_err("built without PostgreSQL (libpq): cannot relay");   /* dconfig refuses it */
        rc = DAEMON_EXIT_CONFIG;
#endif
    } else {
        rc = worker_main(dc, &dc->queues[c->queue], c->rank, slot,
                         &s->cancels[child_index(s, c)], owner);
    }
    _exit(rc);
}

int children_spawn(struct supervisor *s, struct child *c)
{
    if (c->unposted) {          /* its slot still holds its jobs */
        c->respawn_at_ms = slots_now_ms() + RESPAWN_MIN_MS;
        return -1;
    }
    if (c->role == ROLE_WORKER)
        c->rank = worker_rank(s, c);
    metrics_begin(s->metrics);
    slot_reset(&s->slots[child_index(s, c)]);
    metrics_end(s->metrics);
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
    c->killed_for_cancel = 0;
    children_post(s);
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
 * reaper, nqueues + 1: the admin process, nqueues + 2 + i: the relay of
 * source i), running or waiting to respawn. */
static int rows_of(const struct supervisor *s, size_t q)
{
    int n = 0;
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        n += c->role != ROLE_NONE && c->gen == s->cur && !c->retiring && c->queue == (int)q;
    }
    return n;
}

/* The settler of the configuration in force, unless it has one: started
 * before its workers, so that a worker's death always has a settler.
 * Returns 1 when no row is free for it. */
static int start_settler(struct supervisor *s)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        if (c->role == ROLE_SETTLER && c->gen == s->cur && !c->retiring)
            return 0;
    }
    struct child *c = free_row(s);
    if (!c)
        return 1;
    memset(c, 0, sizeof *c);
    c->role = ROLE_SETTLER;
    c->queue = -1;
    c->gen = s->cur;
    children_spawn(s, c);
    return 0;
}

/* How many children of role-number `q` the configuration in force wants
 * (the numbering of struct child's queue). */
static int wanted(const struct supervisor *s, size_t q)
{
    const struct daemon_conf *dc = s->cur->conf;
    if (q < dc->nqueues)
        return dc->queues[q].workers;
    if (q == dc->nqueues)
        return 1;
    if (q == dc->nqueues + 1)
        return s->admin_fd >= 0 && !s->admin_refused;
    return 1;
}

static enum child_role role_of(const struct daemon_conf *dc, size_t q)
{
    return q < dc->nqueues ? ROLE_WORKER
           : q == dc->nqueues ? ROLE_REAPER : q == dc->nqueues + 1 ? ROLE_ADMIN : ROLE_RELAY;
}

/*
 * Give the configuration in force every child it asks for that has no row
 * yet (its settler, its workers per queue, its reaper, its admin process
 * when admin.listen is set, and a relay per source): all of them at start and after a
 * reload, and, when reloads in a row left old children draining in most
 * rows, the rest as those exit (from the tick).  Returns how many still
 * lack a row.
 */
int children_start_missing(struct supervisor *s)
{
    const struct daemon_conf *dc = s->cur->conf;
    int missing = start_settler(s);
    for (size_t q = 0; q <= dc->nqueues + 1 + dc->nsources; q++) {
        int want = wanted(s, q);
        for (int n = rows_of(s, q); n < want; n++) {
            struct child *c = free_row(s);
            if (!c) {
                missing += want - n;
                break;
            }
            memset(c, 0, sizeof *c);
            c->role = role_of(dc, q);
            c->queue = (int)q;
            c->gen = s->cur;
            children_spawn(s, c);
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

/* Have every job a dead worker held settled at once by its generation's
 * settler: what it finished, what was running (failed with `cause`), what
 * it had not started, and a claim on its way (settle.h).  A clean exit
 * leaves nothing but its claims' owner record, which that removes. */
static void settle_dead_worker(struct supervisor *s, struct child *c, const char *cause)
{
    char owner[64];
    owner_name(s, c->pid, owner, sizeof owner);
    settle_side_post(s, c, owner, cause);
}

static int is_child_row(pid_t pid, void *arg)
{
    const struct supervisor *s = arg;
    if (s->check.pid && pid == s->check.pid)
        return 1;               /* the reload's checker */
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
    else if (c->killed_for_cancel)
        snprintf(buf, len, "cancelled; stopped %lld ms after", (long long)c->killed_for_cancel);
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "worker died: signal %d", WTERMSIG(status));
    else
        snprintf(buf, len, "worker died: exit status %d", WEXITSTATUS(status));
}

const char *children_queue_of(const struct child *c)
{
    return c->role == ROLE_WORKER ? c->gen->conf->queues[c->queue].name : NULL;
}

const char *children_label_of(const struct child *c)
{
    /* Only a live row's generation is there to read: an empty row keeps
     * the pointer to one that may have been freed. */
    if (c->role == ROLE_RELAY) {
        const struct daemon_conf *dc = c->gen->conf;
        return dc->sources[c->queue - (int)dc->nqueues - 2].name;
    }
    return children_queue_of(c);
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
        metrics_count_timeout(s->metrics, children_queue_of(c), job.type);
    } else if (c->killed_for_cancel) {
        job = c->killed_job;
        had_job = 1;
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
    /* Keep its counts before the row's slot is reused: in one change the
     * admin process sees whole (metrics.h), so that no counter goes back. */
    metrics_begin(s->metrics);
    if (c->role == ROLE_RELAY)
        metrics_fold_relay(s->metrics, children_label_of(c), &s->slots[child_index(s, c)]);
    else
        metrics_fold_slot(s->metrics, children_queue_of(c), &s->slots[child_index(s, c)]);
    int made_progress = slot_get(&s->slots[child_index(s, c)].jobs_done) > 0;
    if (c->unposted)            /* kept for the tick's post */
        settle_side_keep_slot(s, c);
    else
        slot_reset(&s->slots[child_index(s, c)]);
    c->pid = 0;
    /* A settler that dies while stopping is started again: what it had
     * not settled waits for it (children_stop_settlers). */
    if (c->retiring || (s->stopping && c->role != ROLE_SETTLER)) {
        if (!c->unposted)
            c->role = ROLE_NONE;
        children_post(s);
        metrics_end(s->metrics);
        return;
    }
    children_post(s);
    metrics_end(s->metrics);
    if (c->role == ROLE_ADMIN && WIFEXITED(status)
        && WEXITSTATUS(status) == DAEMON_EXIT_CONFIG) {
        log_err("%s cannot serve this configuration: not restarting it until a reload",
                name);
        c->role = ROLE_NONE;
        s->admin_refused = 1;
        children_post(s);
        return;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == DAEMON_EXIT_CONFIG) {
        log_err("%s cannot start with this configuration: not restarting it", name);
        c->role = ROLE_NONE;
        s->config_refused = 1;
        children_post(s);
        return;
    }
    /* A child that ran jobs, or lived a while, is not crash-looping: a
     * handler that crashes on one job must not slow the queue down. */
    int64_t lived = slots_now_ms() - c->started_ms;
    /* The admin process's first restart is quick: the open pages wait. */
    int64_t first = c->role == ROLE_ADMIN ? RESPAWN_MIN_MS : BACKOFF_FIRST_MS;
    c->backoff_ms = lived >= HEALTHY_AFTER_MS || made_progress ? 0
                    : (c->backoff_ms ? c->backoff_ms * 2 : first);
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
void children_collect(struct supervisor *s)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        if (s->check.pid && pid == s->check.pid) {
            reload_check_exited(&s->check, status);     /* the tick acts on it */
            continue;
        }
        for (int i = 0; i < MAX_CHILDREN; i++)
            if (s->children[i].role != ROLE_NONE && s->children[i].pid == pid) {
                on_child_exit(s, &s->children[i], status);
                break;
            }
    }
}

/* Whether worker row i's job, cancelled while it runs, has had its grace:
 * its handler has not returned cancel_grace_ms after the request reached
 * this daemon (cancel_board.h). */
static int cancel_grace_over(const struct supervisor *s, int i, const struct slot_job *job,
                             int64_t now)
{
    int64_t asked;
    return cancel_request_matches(&s->cancels[i], job->fence, job->id, &asked)
           && now - asked > job->cancel_grace_ms;
}

/* Kill the workers whose handler overran its timeout, or its grace after
 * its job was cancelled: only memory is read (the slots, the cancel
 * board), so the tick never waits. */
void children_check_timeouts(struct supervisor *s, int64_t now)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        struct slot_job job;
        if (c->role != ROLE_WORKER || !c->pid || c->killed_for_timeout || c->killed_for_cancel
            || !slot_read_job(&s->slots[i], &job))
            continue;
        if (job.timeout_ms > 0 && now - job.started_ms > job.timeout_ms) {
            log_warn("w%d: job %s (type %s) overran its timeout of %lldms: stopping the "
                     "worker", i, job.id, job.type, (long long)job.timeout_ms);
            c->killed_for_timeout = job.timeout_ms;
        } else if (cancel_grace_over(s, i, &job, now)) {
            log_warn("w%d: job %s (type %s) was cancelled and its handler has not returned "
                     "within its cancel_grace of %lldms: stopping the worker", i, job.id,
                     job.type, (long long)job.cancel_grace_ms);
            c->killed_for_cancel = job.cancel_grace_ms > 0 ? job.cancel_grace_ms : 1;
        } else {
            continue;
        }
        c->killed_job = job;
        children_signal(s, c, SIGKILL);
    }
}

/* ---- the settlers --------------------------------------------------------- */

/* Whether a worker of `g` has a row (alive, or to respawn). */
static int has_workers(const struct supervisor *s, const struct generation *g)
{
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (s->children[i].role == ROLE_WORKER && s->children[i].gen == g)
            return 1;
    return 0;
}

/* Stop settler `c`: its generation is done with (or the daemon stops). */
static void retire_settler(struct supervisor *s, struct child *c)
{
    c->retiring = 1;
    if (c->pid)
        children_signal(s, c, SIGTERM);
    else
        c->role = ROLE_NONE;
}

void children_retire_settlers(struct supervisor *s)
{
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        if (c->role == ROLE_SETTLER && !c->retiring && c->gen != s->cur
            && !has_workers(s, c->gen) && !settle_side_pending(s, c->gen))
            retire_settler(s, c);
    }
}

void children_stop_settlers(struct supervisor *s, int force)
{
    int64_t now = slots_now_ms();
    for (int i = 0; i < MAX_CHILDREN; i++) {
        struct child *c = &s->children[i];
        if (c->role != ROLE_SETTLER || c->retiring)
            continue;
        if (force || !settle_side_pending(s, c->gen))
            retire_settler(s, c);
        else if (!c->pid && c->respawn_at_ms && now >= c->respawn_at_ms)
            children_spawn(s, c);   /* it died with work left */
    }
}

int children_live(const struct supervisor *s)
{
    int n = 0;
    for (int i = 0; i < MAX_CHILDREN; i++)
        n += s->children[i].role != ROLE_NONE && s->children[i].pid != 0;
    return n;
}

static enum metrics_role posted_role(enum child_role r)
{
    switch (r) {
    case ROLE_WORKER: return MR_WORKER;
    case ROLE_REAPER: return MR_REAPER;
    case ROLE_ADMIN: return MR_ADMIN;
    case ROLE_SETTLER: return MR_SETTLER;
    case ROLE_RELAY: return MR_RELAY;
    case ROLE_NONE: break;
    }
    return MR_NONE;
}

void children_post(struct supervisor *s)
{
    metrics_begin(s->metrics);
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        metrics_post_child(s->metrics, (size_t)i, posted_role(c->role), (int)c->pid,
                           c->role != ROLE_NONE && c->gen == s->cur && !c->retiring,
                           children_label_of(c));
    }
    metrics_end(s->metrics);
}

int children_live_besides_settlers(const struct supervisor *s)
{
    int n = 0;
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        n += c->role != ROLE_NONE && c->role != ROLE_SETTLER && c->role != ROLE_ADMIN
             && c->pid != 0;
    }
    return n;
}
