/*
 * The channels an rconn subscribes to on every (re)connect, kept as the
 * arguments of one SUBSCRIBE (rconn.c sends it in its handshake).
 */
#ifndef DQ_RCONN_CHANNELS_H
#define DQ_RCONN_CHANNELS_H

#include <stddef.h>

struct rconn_channels {
    char **names;               /* copies, owned; NULL when none */
    size_t n;
};

/* Replace the list with copies of names[0 .. n-1].  -1 when out of memory:
 * the list is then empty. */
int rconn_channels_set(struct rconn_channels *ch, const char *const *names, size_t n)
    __attribute__((warn_unused_result));

/* "SUBSCRIBE" and every name: ch->n + 1 strings, borrowed from the list;
 * free the array (not the strings).  NULL when out of memory. */
const char **rconn_channels_argv(const struct rconn_channels *ch);

/* Empty the list. */
void rconn_channels_free(struct rconn_channels *ch);

#endif
