/*
 * What the admin process answers: /metrics and /healthz, and the
 * dashboard's view of the daemon (struct ui_env), from a snapshot of the
 * supervisor's shared figures (metrics_snap_take), the workers' slots and
 * the cached statistics.  Nothing here asks Redis.
 */
#include <stdio.h>
#include <string.h>

#include "daemon/admin/admin_int.h"
#include "daemon/admin/admin_main.h"
#include "daemon/admin/metrics.h"
#include "daemon/log.h"

/* ---- /metrics and /healthz ------------------------------------------------ */

static void read_stats(const struct admin *ad, struct qstats_view *stats)
{
    if (ad->stats)
        qstats_read(ad->stats, stats);
    else
        *stats = (struct qstats_view){ .age_ms = -1, .why = "statistics not refreshed" };
}

/* Answer /metrics (health 0) or /healthz (health 1); returns the status. */
static int answer(struct admin *ad, FILE *out, struct http_admin_header *extra, int health)
{
    struct metrics_snap *snap = metrics_snap_take(ad->a->metrics, ad->a->slots);
    if (!snap) {
        fputs("the supervisor's figures cannot be read now\n", out);
        return 503;
    }
    struct qstats_view stats;
    read_stats(ad, &stats);
    if (stats.age_ms >= 0) {
        snprintf(extra->name, sizeof extra->name, "X-Delayq-Stats-Age");
        snprintf(extra->value, sizeof extra->value, "%.3f", (double)stats.age_ms / 1000.0);
    }
    struct metrics_view v = { .snap = snap, .conf = ad->a->dc, .stats = &stats };
    int code = health ? metrics_health(&v, out) : metrics_write(&v, out);
    metrics_snap_free(snap);
    return code;
}

static int on_metrics(FILE *out, struct http_admin_header *extra, void *arg)
{
    return answer(arg, out, extra, 0);
}

static int on_healthz(FILE *out, struct http_admin_header *extra, void *arg)
{
    return answer(arg, out, extra, 1);
}

const struct http_admin_route admin_routes[2] = {
    { "/metrics", "text/plain; version=0.0.4; charset=utf-8", on_metrics },
    { "/healthz", "text/plain; charset=utf-8", on_healthz },
};

/* ---- the dashboard's view ---------------------------------------------------- */

/* Workers with a process, connected and claiming, per queue of the
 * configuration, from the snapshot; and the configuration's counts. */
static void count_live(struct admin *ad, const struct metrics_snap *snap)
{
    const struct daemon_conf *dc = ad->a->dc;
    for (size_t q = 0; q < dc->nqueues && q < DCONFIG_MAX_QUEUES; q++) {
        ad->live[q] = (struct ui_queue_live){ 0, dc->queues[q].workers };
        for (size_t i = 0; snap && i < snap->nchildren; i++) {
            const struct metrics_post *c = &snap->children[i];
            ad->live[q].workers_alive += c->role == MR_WORKER && c->in_force && c->pid
                                         && strcmp(c->queue, dc->queues[q].name) == 0
                                         && __atomic_load_n(&ad->a->slots[i].ready,
                                                            __ATOMIC_ACQUIRE);
        }
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
    struct admin *ad = arg;
    const struct metrics_snap *snap = ad->snap;
    for (size_t i = 0; snap && i < snap->nchildren; i++) {
        const struct metrics_post *c = &snap->children[i];
        if (c->role != MR_WORKER || !c->pid || strcmp(c->queue, queue) != 0)
            continue;
        const struct worker_slot *slot = &ad->a->slots[i];
        struct slot_job job;
        if (slot_read_job(slot, &job) && strcmp(job.id, id) == 0)
            return c->pid;
        for (int t = 0; t < SLOT_TABLES; t++) {
            const struct slot_table *tb = &slot->tables[t];
            uint32_t n = __atomic_load_n(&tb->n, __ATOMIC_ACQUIRE);
            for (uint32_t k = 0; k < n && k < DQ_CLAIM_MAX; k++)
                if (entry_holds(&tb->e[k], id))
                    return c->pid;
        }
    }
    return 0;
}

/* The dashboard's view for one request (ui.h's fill): a fresh snapshot
 * (the previous one is freed: the pages keep no pointer across calls). */
static void fill(void *arg, struct ui_env *env)
{
    struct admin *ad = arg;
    const struct daemon_conf *dc = ad->a->dc;
    struct metrics_snap *snap = metrics_snap_take(ad->a->metrics, ad->a->slots);
    if (snap) {
        metrics_snap_free(ad->snap);
        ad->snap = snap;
    }
    env->conf = dc;
    read_stats(ad, &env->stats);
    count_live(ad, ad->snap);
    env->live = ad->live;
    env->data = ad->data;           /* NULL while admin.ui is off */
    env->history = dc->admin_ui ? ad->a->history : NULL;
    env->read_only = dc->admin_read_only;
    env->holder = holder;
    env->holder_arg = ad;
}

static void on_ui_request(struct evhttp_request *req, void *arg)
{
    ui_handle(arg, req);
}

static void on_ui_close(struct evhttp_connection *evcon, void *arg)
{
    ui_connection_closed(arg, evcon);
}

int admin_view_ui_setup(struct admin *ad)
{
    struct ui_host host = { fill, ad, ad->a->sessions };
    if (!(ad->ui = ui_new(&host)))
        return -1;
    http_admin_set_prefix(ad->http, "/ui/", on_ui_request, on_ui_close, ad->ui);
    const struct daemon_conf *dc = ad->a->dc;
    ui_set_conf(ad->ui, dc);
    if (dc->admin_ui && dc->metrics_listen)
        log_info("dashboard: http://%s/ui/ (%s%s%s%s)", dc->metrics_listen,
                 dc->admin_token ? "token" : "",
                 dc->admin_token && dc->admin_basic ? " or " : "",
                 dc->admin_basic ? "basic credentials" : "",
                 dc->admin_read_only ? ", read-only" : "");
    return 0;
}

/* ---- the history ---------------------------------------------------------------- */

void admin_view_sample_history(struct admin *ad)
{
    const struct daemon_conf *dc = ad->a->dc;
    struct ui_history *h = ad->a->history;
    struct metrics_snap *snap = h ? metrics_snap_take(ad->a->metrics, ad->a->slots) : NULL;
    /* Only the admin of the configuration in force writes: during a
     * reload the old one may still be answering. */
    if (!snap || snap->conf_gen != ad->a->conf_gen || ad->stopping) {
        metrics_snap_free(snap);
        return;
    }
    if (!dc->admin_ui) {
        ui_history_clear(h);
        metrics_snap_free(snap);
        return;
    }
    int64_t now = slots_now_ms();
    for (size_t q = 0; q < dc->nqueues; q++) {
        struct ui_totals t;
        metrics_queue_totals(snap, dc->queues[q].name, &t);
        ui_history_sample(h, dc->queues[q].name, now, &t);
    }
    metrics_snap_free(snap);
}
