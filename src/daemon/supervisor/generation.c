#include "daemon/supervisor/generation.h"

#include <stdlib.h>

struct generation *generation_new(struct daemon_conf *conf, uint64_t id)
{
    struct generation *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->id = id;
    g->conf = conf;
    return g;
}

void generation_free(struct generation *g)
{
    if (!g)
        return;
    if (g->conf) {
        dconfig_free(g->conf);
        free(g->conf);
    }
    free(g);
}
