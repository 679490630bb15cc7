#include "daemon/supervisor/generation.h"

#include <stdlib.h>

struct generation *generation_new(struct event_base *base, struct daemon_conf *conf,
                                  uint64_t id)
{
    struct generation *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->id = id;
    if (conf->metrics_listen)
        g->stats = qstats_new(base, conf);
    if (conf->admin_ui)
        g->ui = ui_data_new(base, conf);
    if ((conf->metrics_listen && !g->stats) || (conf->admin_ui && !g->ui)) {
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
    ui_data_free(g->ui);
    g->ui = NULL;
}

void generation_close_in_child(struct generation *g)
{
    if (!g)
        return;
    qstats_close_in_child(g->stats);
    ui_data_close_in_child(g->ui);
}

void generation_free(struct generation *g)
{
    if (!g)
        return;
    qstats_free(g->stats);
    ui_data_free(g->ui);
    if (g->conf) {
        dconfig_free(g->conf);
        free(g->conf);
    }
    free(g);
}
