#include "redis/rconn_channels.h"

#include <stdlib.h>
#include <string.h>

void rconn_channels_free(struct rconn_channels *ch)
{
    for (size_t i = 0; i < ch->n; i++)
        free(ch->names[i]);
    free(ch->names);
    ch->names = NULL;
    ch->n = 0;
}

int rconn_channels_set(struct rconn_channels *ch, const char *const *names, size_t n)
{
    rconn_channels_free(ch);
    if (!(ch->names = calloc(n ? n : 1, sizeof *ch->names)))
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (!(ch->names[i] = strdup(names[i]))) {
            ch->n = i;
            rconn_channels_free(ch);
            return -1;
        }
    }
    ch->n = n;
    return 0;
}

const char **rconn_channels_argv(const struct rconn_channels *ch)
{
    const char **argv = calloc(ch->n + 1, sizeof *argv);
    if (!argv)
        return NULL;
    argv[0] = "SUBSCRIBE";
    for (size_t i = 0; i < ch->n; i++)
        argv[i + 1] = ch->names[i];
    return argv;
}
