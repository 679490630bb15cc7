#include "daemon/supervisor/generation.h"

#include <stdlib.h>

struct generation *generation_new(struct event_base *base, struct daemon_conf *conf,
                                  struct metrics *metrics)
{
    struct generation *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->settler = settler_new(base, conf, metrics);
    if (conf->redis.sentinel.master)
        g->watch = sentinel_watch_new(base, &conf->redis, metrics);
    if (!g->settler || (conf->redis.sentinel.master && !g->watch)) {
        generation_free(g);     /* conf is not ours yet */
        return NULL;
    }
    g->conf = conf;
    return g;
}

void generation_retire(struct generation *g)
{
    sentinel_watch_free(g->watch);
    g->watch = NULL;
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
    sentinel_watch_close_in_child(g->watch);
}

void generation_free(struct generation *g)
{
    if (!g)
        return;
    sentinel_watch_free(g->watch);
    settler_free(g->settler);
    if (g->conf) {
        dconfig_free(g->conf);
        free(g->conf);
    }
    free(g);
}
