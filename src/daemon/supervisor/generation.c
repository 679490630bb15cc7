#include "daemon/supervisor/generation.h"

#include <stdlib.h>

struct generation *generation_new(struct event_base *base, struct daemon_conf *conf,
                                  struct metrics *metrics)
{
    struct generation *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->settler = settler_new(base, conf, metrics);
    if (conf->metrics_listen)
        g->stats = qstats_new(base, conf);
    if (conf->redis.sentinel.master)
        g->watch = sentinel_watch_new(base, &conf->redis, metrics);
    if (conf->admin_ui)
        g->ui = ui_data_new(base, conf);
    if (!g->settler || (conf->metrics_listen && !g->stats)
        || (conf->redis.sentinel.master && !g->watch) || (conf->admin_ui && !g->ui)) {
        generation_free(g);     /* conf is not ours yet */
        return NULL;
    }
    g->conf = conf;
    return g;
}

void generation_retire(struct generation *g)
{
    qstats_free(g->stats);
    g->stats = NULL;
    sentinel_watch_free(g->watch);
    g->watch = NULL;
    ui_data_free(g->ui);
    g->ui = NULL;
}

int generation_idle(const struct generation *g)
{
    return settler_idle(g->settler);
}

void generation_close_in_child(struct generation *g)
{
    if (!g)
        return;
    settler_close_in_child(g->settler);
    qstats_close_in_child(g->stats);
    sentinel_watch_close_in_child(g->watch);
    ui_data_close_in_child(g->ui);
}

void generation_free(struct generation *g)
{
    if (!g)
        return;
    qstats_free(g->stats);
    sentinel_watch_free(g->watch);
    ui_data_free(g->ui);
    settler_free(g->settler);
    if (g->conf) {
        dconfig_free(g->conf);
        free(g->conf);
    }
    free(g);
}
