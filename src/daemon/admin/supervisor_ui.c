/*
 * The supervisor's side of the dashboard (ui.h): it hands /ui/ requests
 * from the admin server to the dashboard, keeps the dashboard's
 * configuration current, and fills each request's view of its state
 * (struct ui_env) from what it already has: the configuration in force,
 * the cached statistics, its child table and the workers' slots.  Nothing
 * here asks Redis.
 */
#include <string.h>

#include "daemon/admin/http_admin.h"
#include "daemon/log.h"
#include "daemon/supervisor/supervisor_int.h"
#include "daemon/admin/ui.h"

/* Workers with a process, connected and claiming, per queue of the
 * configuration in force; and the configuration's counts. */
static void count_live(struct supervisor *s)
{
    const struct daemon_conf *dc = s->cur->conf;
    for (size_t q = 0; q < dc->nqueues && q < DCONFIG_MAX_QUEUES; q++)
        s->ui_live[q] = (struct ui_queue_live){ 0, dc->queues[q].workers };
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        if (c->role != ROLE_WORKER || c->gen != s->cur || c->retiring || !c->pid
            || !__atomic_load_n(&s->slots[i].ready, __ATOMIC_ACQUIRE))
            continue;
        if (c->queue >= 0 && (size_t)c->queue < dc->nqueues)
            s->ui_live[c->queue].workers_alive++;
    }
}

/* Whether table entry `e` (written by a live worker, read without a lock:
 * a torn id reads as another id, never past the buffer) holds `id`. */
static int entry_holds(const struct slot_entry *e, const char *id)
{
    int st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
    return (st == SE_PENDING || st == SE_RUNNING)
           && strncmp(e->id, id, sizeof e->id) == 0;
}

/* The pid of this host's worker of `queue` that holds job `id`: running
 * it, or claimed in one of its tables; 0 when none does. */
static pid_t holder(void *arg, const char *queue, const char *id)
{
    struct supervisor *s = arg;
    for (int i = 0; i < MAX_CHILDREN; i++) {
        const struct child *c = &s->children[i];
        const char *q = children_queue_of(c);
        if (!c->pid || !q || strcmp(q, queue) != 0)
            continue;
        struct slot_job job;
        if (slot_read_job(&s->slots[i], &job) && strcmp(job.id, id) == 0)
            return c->pid;
        for (int t = 0; t < SLOT_TABLES; t++) {
            const struct slot_table *tb = &s->slots[i].tables[t];
            uint32_t n = __atomic_load_n(&tb->n, __ATOMIC_ACQUIRE);
            for (uint32_t k = 0; k < n && k < DQ_CLAIM_MAX; k++)
                if (entry_holds(&tb->e[k], id))
                    return c->pid;
        }
    }
    return 0;
}

static void fill(void *arg, struct ui_env *env)
{
    struct supervisor *s = arg;
    env->conf = s->cur->conf;
    if (s->cur->stats)
        qstats_read(s->cur->stats, &env->stats);
    else
        env->stats = (struct qstats_view){ .age_ms = -1, .why = "statistics not refreshed" };
    count_live(s);
    env->live = s->ui_live;
    env->data = s->cur->ui;     /* NULL while admin.ui is off */
    env->history = s->history; /* NULL while admin.ui is off */
    env->read_only = s->cur->conf->admin_read_only;
    env->holder = holder;
    env->holder_arg = s;
}

static void on_ui_request(struct evhttp_request *req, void *arg)
{
    ui_handle(arg, req);
}

static void on_ui_close(struct evhttp_connection *evcon, void *arg)
{
    ui_connection_closed(arg, evcon);
}

int supervisor_ui_setup(struct supervisor *s)
{
    struct ui_host host = { fill, s };
    if (!(s->ui = ui_new(&host)))
        return -1;
    http_admin_set_prefix(s->http, "/ui/", on_ui_request, on_ui_close, s->ui);
    return 0;
}

void supervisor_ui_conf(struct supervisor *s)
{
    const struct daemon_conf *dc = s->cur->conf;
    ui_set_conf(s->ui, dc);
    if (http_admin_set_conf(s->http, dc) < 0)
        log_warn("admin: out of memory taking admin.hosts: the previous names stay");
    if (!dc->admin_ui || !dc->metrics_listen)
        return;
    log_info("dashboard: http://%s/ui/ (%s%s%s%s)", dc->metrics_listen,
             dc->admin_token ? "token" : "", dc->admin_token && dc->admin_basic ? " or " : "",
             dc->admin_basic ? "basic credentials" : "",
             dc->admin_read_only ? ", read-only" : "");
}
