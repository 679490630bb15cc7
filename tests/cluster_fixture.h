/*
 * A local Redis Cluster owned by a test (or the bench): M masters with R
 * replicas each, real redis-server processes on free loopback ports, in
 * one temporary directory, stopped by pid.  Nodes also listen on a unix
 * socket in their directory: the fixture sends its own commands there
 * (so they work the same under TLS).
 *
 * Node indexes: 0 .. M-1 are the masters as started, M + m*R + r the
 * r-th replica of master m.  Roles change after a failover; the helpers
 * that care ask the cluster, not this table.
 *
 * The cluster is formed by hand (CLUSTER ADDSLOTSRANGE, MEET, REPLICATE:
 * no redis-cli needed), with a short node timeout (1 s) so that a killed
 * master's replica takes over in about two seconds.  Slots move the way
 * `redis-cli --cluster reshard` moves them (SETSLOT IMPORTING/MIGRATING,
 * MIGRATE the keys, SETSLOT NODE), optionally in a background process
 * while a test runs.
 *
 * Nothing here depends on Check: errors come back as -1 with one line in
 * the caller's buffer.
 */
#ifndef DQ_TEST_CLUSTER_FIXTURE_H
#define DQ_TEST_CLUSTER_FIXTURE_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <sys/types.h>

#define CLUSTER_FX_MAX_NODES 12
#define CLUSTER_FX_SLOTS 16384

/* What a cluster may add to the plain one (all NULL: plain). */
struct cluster_fx_opts {
    const char *password;   /* nodes require it (requirepass, or the ACL
                               user's password when `user` is set) */
    const char *user;       /* an ACL user with every right; the default
                               user is then turned off */
    const char *tls_dir;    /* nodes speak TLS only on their ports (also
                               the cluster bus and replication), with
                               DIR/server.crt, server.key, ca.crt
                               (tests/tls-certs.sh) */
    int client_certs;       /* with tls_dir: clients must present a
                               certificate ca.crt signed
                               (tls-auth-clients yes; the nodes present
                               server.crt to each other); 0: none asked */
};

struct cluster_fx {
    int nmasters;                       /* as started */
    int nreplicas;                      /* replicas per master */
    int nnodes;
    int port[CLUSTER_FX_MAX_NODES];     /* the port clients use */
    int bus_port[CLUSTER_FX_MAX_NODES];
    pid_t pid[CLUSTER_FX_MAX_NODES];    /* 0: stopped or killed */
    char id[CLUSTER_FX_MAX_NODES][41];  /* CLUSTER MYID */
    char sock[CLUSTER_FX_MAX_NODES][160];
    char addr[CLUSTER_FX_MAX_NODES][32]; /* "127.0.0.1:PORT" */
    const char *seeds[CLUSTER_FX_MAX_NODES + 1]; /* addr[] of every node,
                                           NULL-ended: dq_options.nodes */
    char dir[128];                      /* the temporary directory */
    char password[128], user[64];       /* "" for none */
    char tls_dir[200];                  /* "" for plain */
    int client_certs;                   /* tls-auth-clients yes */
    int dead_slot[CLUSTER_FX_MAX_NODES]; /* a slot node i served when
                                           cluster_fx_kill killed it, or -1 */
    pid_t reshard_pid;                  /* a background reshard, or 0 */
    int aof[CLUSTER_FX_MAX_NODES];      /* cluster_fx_persist: started with
                                           an fsync'd append-only file */
};

/* Whether a cluster can be started here: 0, or -1 with a one-line reason
 * (no redis-server).  Tests skip (exit 77) on -1. */
int cluster_fx_available(char *why, size_t whylen);

/*
 * Start `masters` masters (1..) with `replicas_per_master` replicas each,
 * slots spread evenly, and wait (30 s at most) until every node says
 * cluster_state:ok, every replica's link is up and every node agrees on
 * the slots and the replicas.  `o` may be NULL.  0, or -1 with the reason
 * (whatever started is stopped again).
 */
int cluster_fx_start(struct cluster_fx *c, int masters, int replicas_per_master,
                     const struct cluster_fx_opts *o, char *err, size_t errlen);

/* Stop every node by pid (and a background reshard) and remove the
 * directory. */
void cluster_fx_stop(struct cluster_fx *c);

/* A blocking connection to node `idx` (its unix socket, authenticated),
 * timeouts `timeout_ms`; NULL with the reason.  redisFree it. */
redisContext *cluster_fx_connect(const struct cluster_fx *c, int idx, int timeout_ms,
                                 char *err, size_t errlen);

/* A command on node `idx` (printf-style); the reply (freeReplyObject it),
 * or NULL when the node cannot be asked. */
redisReply *cluster_fx_cmd(const struct cluster_fx *c, int idx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As tu_redis_int, on node `idx`: an integer reply, an array's length, 0
 * for a status; -1 on error. */
long long cluster_fx_int(const struct cluster_fx *c, int idx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The index of the node at `port`, or -1. */
int cluster_fx_index_of_port(const struct cluster_fx *c, int port);

/* The index of the master that serves `slot` as a live node sees it, or
 * -1. */
int cluster_fx_master_of_slot(const struct cluster_fx *c, int slot);

/* How many keys node `idx` holds: all (pattern NULL: DBSIZE) or those
 * matching `pattern` (SCAN MATCH); -1 when it cannot be asked. */
long long cluster_fx_keys_on(const struct cluster_fx *c, int idx, const char *pattern);

/* Move `slot` with its keys to master `to_idx` (nothing when it is
 * there).  0, or -1 with the reason. */
int cluster_fx_move_slot(struct cluster_fx *c, int slot, int to_idx, char *err, size_t errlen);

/* Move the `nslots` lowest slots master `from_idx` serves to `to_idx`. */
int cluster_fx_move_slots(struct cluster_fx *c, int from_idx, int to_idx, int nslots,
                          char *err, size_t errlen);

/* Move `slots` (n of them) to `to_idx` in a background process, one after
 * another with `pause_ms` between them, while the caller goes on.  0, or
 * -1 with the reason (one reshard at a time). */
int cluster_fx_reshard_start(struct cluster_fx *c, const int *slots, size_t n, int to_idx,
                             int pause_ms, char *err, size_t errlen);

/* The same with a master for each slot: slots[i] goes to to[i]. */
int cluster_fx_reshard_start_to(struct cluster_fx *c, const int *slots, const int *to,
                                size_t n, int pause_ms, char *err, size_t errlen);

/* Wait for the background reshard; 0 when every slot moved, -1 with the
 * reason (its error went to stderr). */
int cluster_fx_reshard_wait(struct cluster_fx *c, char *err, size_t errlen);

/* kill -9 node `idx` (and reap it). */
void cluster_fx_kill(struct cluster_fx *c, int idx);

/* Start killed node `idx` again on its ports: it rejoins the cluster
 * (from its nodes.conf) and, its slots taken over, as a replica of the
 * new owner.  Waits (30 s at most) until its replication link is up.  0,
 * or -1 with the reason. */
int cluster_fx_restart(struct cluster_fx *c, int idx, char *err, size_t errlen);

/* Make node `idx` keep its data across a kill: an append-only file
 * fsync'd at every write, now (CONFIG SET, waiting for the file to be
 * written) and at its restarts.  0, or -1 with the reason. */
int cluster_fx_persist(struct cluster_fx *c, int idx, char *err, size_t errlen);

/* Start killed master `idx` again when no replica took over: it comes
 * back with its slots (and, persisted, its keys).  Waits (30 s at most)
 * until every node says cluster_state:ok.  0, or -1 with the reason. */
int cluster_fx_restart_master(struct cluster_fx *c, int idx, char *err, size_t errlen);

/* Wait (up to `timeout_ms`) until the slots master `idx` served before it
 * died are served by another live node that every live node agrees on,
 * with cluster_state:ok everywhere.  Returns that node's index, or -1. */
int cluster_fx_wait_promoted(struct cluster_fx *c, int idx, int timeout_ms);

/* Wait (up to `timeout_ms`) until every live node says cluster_state:ok
 * and agrees on who serves each slot; 0, or -1. */
int cluster_fx_wait_ok(const struct cluster_fx *c, int timeout_ms);

#endif
