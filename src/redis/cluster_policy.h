/*
 * What a Redis Cluster's answer to one command means and what to do next:
 * the one policy of the blocking client (lib/client_cluster.c) and the
 * daemon's async connections (redis/rconn_cluster.c).  Pure: no I/O, no
 * clock, no state; the caller passes the facts (the reply's error text,
 * where the command stands) and acts on the decision.
 *
 * The rules (cluster_policy_decide):
 * - MOVED slot host:port: the slot is served there now; update the map,
 *   plan a full map refresh (a reshard moves many slots) and send again
 *   there.  A redirection.
 * - ASK slot host:port: send "ASKING" then the command to that node, once;
 *   the map is not changed.  A redirection.  An ASK answering a command
 *   already sent after ASKING is given to the caller as its error.
 * - More than CLUSTER_REDIRECTS_MAX redirections in a row: give up with
 *   the last one as the error.
 * - TRYAGAIN (a multi-key command during a migration) or CLUSTERDOWN: back
 *   off (the pause step, doubled each time up to CLUSTER_PAUSE_MAX_MS, cut
 *   to what is left of the budget) and send again; the redirection count
 *   starts again.  Past the budget: give up.
 * - READONLY, MASTERDOWN, LOADING (the node is no longer a writable
 *   master: a failover): refresh the map from any node, back off, send
 *   again.  Nothing ran.
 * - No reply and the command never reached the node (no master serves the
 *   slot, the connection is down, the write was refused): refresh the map,
 *   back off, send again, within the budget.
 * - No reply though the command was written (the master was lost): give
 *   up and refresh the map; the command may have run, so it is never sent
 *   again here (the caller's caller decides).
 * - Any other reply: it is the command's answer (or its error).
 */
#ifndef DQ_CLUSTER_POLICY_H
#define DQ_CLUSTER_POLICY_H

#include <stdint.h>

#include "redis/cluster_map.h"

#define CLUSTER_REDIRECTS_MAX 16     /* MOVED/ASK in a row for one command */
#define CLUSTER_PAUSE_MIN_MS 100     /* the first pause */
#define CLUSTER_PAUSE_MAX_MS 1000    /* the longest: be there soon after a promotion */

/* What a cluster error's text is. */
enum cluster_error_kind {
    CLUSTER_ERR_NONE,           /* not a cluster matter (or not an error) */
    CLUSTER_ERR_MOVED,
    CLUSTER_ERR_ASK,
    CLUSTER_ERR_TRYAGAIN,
    CLUSTER_ERR_CLUSTERDOWN,
    CLUSTER_ERR_DEMOTED,        /* READONLY, MASTERDOWN, LOADING */
};

/* The kind of error text `err` (NULL: none).  A MOVED or ASK with a
 * malformed slot or address is CLUSTER_ERR_NONE: the caller's error. */
enum cluster_error_kind cluster_error_kind(const char *err);

/* Where one command stands when its reply (or its loss) is judged. */
struct cluster_facts {
    const char *error;      /* the reply's error text; NULL: an answer, or no reply */
    int no_reply;           /* no reply came (then `error` is ignored) */
    int sent;               /* with no_reply: the command was written (may have run) */
    int asked;              /* it was sent after ASKING */
    int redirects;          /* MOVED/ASK followed in a row so far */
    int pause_ms;           /* the next pause step (0: CLUSTER_PAUSE_MIN_MS) */
    int64_t elapsed_ms;     /* waited (or since first sent) so far */
    int64_t budget_ms;      /* how long it may wait in all */
    unsigned long rnd;      /* any random number: the pause's jitter */
};

enum cluster_verdict {
    CLUSTER_ANSWER,         /* the reply is the command's: give it to the caller */
    CLUSTER_RESEND_MOVED,   /* map: slot -> host:port, then send there */
    CLUSTER_RESEND_ASK,     /* ASKING then the command on host:port, once */
    CLUSTER_BACK_OFF,       /* wait delay_ms, then send again */
    CLUSTER_REFRESH,        /* read the map from any node, wait delay_ms, send again */
    CLUSTER_GIVE_UP,        /* the caller gets an error: `why` */
};

struct cluster_decision {
    enum cluster_verdict verdict;
    int refresh_map;        /* read the whole map again (soon, from any node) */
    int outage;             /* BACK_OFF, REFRESH, GIVE_UP: the cluster is not serving
                             * (a connect-class failure), else a redis error */
    unsigned slot;          /* RESEND_MOVED, RESEND_ASK: the slot and its node */
    char host[CLUSTER_HOST_MAX];
    int port;
    int delay_ms;           /* BACK_OFF, REFRESH: the pause */
    int pause_ms;           /* the pause step to pass next time */
    int redirects;          /* the redirection count to pass next time */
    char why[200];          /* GIVE_UP: one line */
};

/* Judge `f` into *d (every field set).  Never fails. */
void cluster_policy_decide(const struct cluster_facts *f, struct cluster_decision *d);

#endif
