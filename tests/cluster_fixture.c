#include "config.h"

#include "cluster_fixture.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define CMD_TIMEOUT_MS 5000
#define START_TIMEOUT_MS 30000
#define MIGRATE_BATCH 100

/* ---- commands to one node ------------------------------------------------- */

redisContext *cluster_fx_connect(const struct cluster_fx *c, int idx, int timeout_ms,
                                 char *err, size_t errlen)
{
    redisContext *rc = tu_redis_connect(c->sock[idx], timeout_ms, err, errlen);
    if (!rc || !c->password[0])
        return rc;
    redisReply *r = c->user[0] ? redisCommand(rc, "AUTH %s %s", c->user, c->password)
                               : redisCommand(rc, "AUTH %s", c->password);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok)
        snprintf(err, errlen, "node %d: AUTH failed: %s", idx,
                 r && r->type == REDIS_REPLY_ERROR ? r->str : rc->errstr);
    if (r)
        freeReplyObject(r);
    if (ok)
        return rc;
    redisFree(rc);
    return NULL;
}

static redisReply *vcmd(const struct cluster_fx *c, int idx, const char *fmt, va_list ap)
{
    char err[300];
    if (idx < 0 || idx >= c->nnodes || c->pid[idx] <= 0)
        return NULL;
    redisContext *rc = cluster_fx_connect(c, idx, CMD_TIMEOUT_MS, err, sizeof err);
    if (!rc)
        return NULL;
    redisReply *r = redisvCommand(rc, fmt, ap);
    redisFree(rc);
    return r;
}

redisReply *cluster_fx_cmd(const struct cluster_fx *c, int idx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = vcmd(c, idx, fmt, ap);
    va_end(ap);
    return r;
}

long long cluster_fx_int(const struct cluster_fx *c, int idx, const char *fmt, ...)
{
    char err[300];
    if (idx < 0 || idx >= c->nnodes || c->pid[idx] <= 0)
        return -1;
    redisContext *rc = cluster_fx_connect(c, idx, CMD_TIMEOUT_MS, err, sizeof err);
    if (!rc)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    long long v = tu_redis_vint(rc, fmt, ap);
    va_end(ap);
    redisFree(rc);
    return v;
}

/* A status reply ("OK") to a command on node `idx`: 0, or -1 with the
 * node's answer in `err`. */
static int node_ok(const struct cluster_fx *c, int idx, char *err, size_t errlen,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int node_ok(const struct cluster_fx *c, int idx, char *err, size_t errlen,
                   const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = vcmd(c, idx, fmt, ap);
    va_end(ap);
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (!ok)
        snprintf(err, errlen, "node %d (port %d): %s: %s", idx, c->port[idx], fmt,
                 r && r->type == REDIS_REPLY_ERROR ? r->str : "no answer");
    if (r)
        freeReplyObject(r);
    return ok ? 0 : -1;
}

/* Whether the text reply to `cmd` `arg` (INFO replication, CLUSTER
 * INFO ...) on node `idx` contains `needle`. */
static int node_says(const struct cluster_fx *c, int idx, const char *cmd, const char *arg,
                     const char *needle)
{
    redisReply *r = cluster_fx_cmd(c, idx, "%s %s", cmd, arg);
    int yes = r && r->type == REDIS_REPLY_STRING
              && strstr(r->str, needle) != NULL;
    if (r)
        freeReplyObject(r);
    return yes;
}

int cluster_fx_index_of_port(const struct cluster_fx *c, int port)
{
    for (int i = 0; i < c->nnodes; i++)
        if (c->port[i] == port)
            return i;
    return -1;
}

/* ---- the slot table as nodes see it ---------------------------------------- */

/*
 * Node `idx`'s CLUSTER SLOTS as a canonical text (ranges in order, each
 * with its master's and its replicas' ports, replicas sorted), into `out`;
 * also the master index of every slot into `owner` (may be NULL).  Two
 * nodes agree when their texts are equal.  0, or -1 when it cannot be
 * asked.
 */
static int slots_text(const struct cluster_fx *c, int idx, char *out, size_t len, int *owner)
{
    redisReply *r = cluster_fx_cmd(c, idx, "CLUSTER SLOTS");
    if (!r || r->type != REDIS_REPLY_ARRAY) {
        if (r)
            freeReplyObject(r);
        return -1;
    }
    /* CLUSTER SLOTS lists ranges in no promised order: sort by start. */
    size_t n = r->elements, used = 0;
    size_t *order = calloc(n ? n : 1, sizeof *order);
    if (!order) {
        freeReplyObject(r);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && r->element[order[j]]->element[0]->integer
                                    < r->element[order[j - 1]]->element[0]->integer; j--) {
            size_t t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    out[0] = '\0';
    for (size_t k = 0; k < n; k++) {
        redisReply *e = r->element[order[k]];
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 3)
            continue;
        long long lo = e->element[0]->integer, hi = e->element[1]->integer;
        int mport = (int)e->element[2]->element[1]->integer;
        int reps[CLUSTER_FX_MAX_NODES], nr = 0;
        for (size_t j = 3; j < e->elements && nr < CLUSTER_FX_MAX_NODES; j++)
            reps[nr++] = (int)e->element[j]->element[1]->integer;
        for (int a = 1; a < nr; a++)
            for (int b = a; b > 0 && reps[b] < reps[b - 1]; b--) {
                int t = reps[b];
                reps[b] = reps[b - 1];
                reps[b - 1] = t;
            }
        used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%lld-%lld:%d", lo,
                                 hi, mport);
        for (int j = 0; j < nr; j++)
            used += (size_t)snprintf(out + used, used < len ? len - used : 0, ",%d", reps[j]);
        used += (size_t)snprintf(out + used, used < len ? len - used : 0, ";");
        if (owner)
            for (long long s = lo; s <= hi && s < CLUSTER_FX_SLOTS; s++)
                owner[s] = cluster_fx_index_of_port(c, mport);
    }
    free(order);
    freeReplyObject(r);
    return used < len ? 0 : -1;
}

int cluster_fx_master_of_slot(const struct cluster_fx *c, int slot)
{
    if (slot < 0 || slot >= CLUSTER_FX_SLOTS)
        return -1;
    static int owner[CLUSTER_FX_SLOTS];
    static char text[16384];
    for (int i = 0; i < c->nnodes; i++) {
        if (c->pid[i] <= 0)
            continue;
        for (int s = 0; s < CLUSTER_FX_SLOTS; s++)
            owner[s] = -1;
        if (slots_text(c, i, text, sizeof text, owner) == 0)
            return owner[slot];
    }
    return -1;
}

/*
 * Whether the cluster is settled: every live node says cluster_state:ok,
 * every live node's slot table is the same, and (when `full` is set)
 * that table names every node as master or replica (the replicas have
 * been seen by all).
 */
static int settled(const struct cluster_fx *c, int full)
{
    static char first[16384], text[16384];
    int have = 0, live = 0;
    for (int i = 0; i < c->nnodes; i++) {
        if (c->pid[i] <= 0)
            continue;
        live++;
        if (!node_says(c, i, "CLUSTER", "INFO", "cluster_state:ok"))
            return 0;
        if (slots_text(c, i, have ? text : first, sizeof text, NULL) < 0)
            return 0;
        if (have && strcmp(first, text) != 0)
            return 0;
        have = 1;
    }
    if (!have)
        return 0;
    if (full) {
        /* every live port appears in the table */
        int seen = 0;
        for (int i = 0; i < c->nnodes; i++) {
            char p[16];
            snprintf(p, sizeof p, ":%d", c->port[i]);
            char q[16];
            snprintf(q, sizeof q, ",%d", c->port[i]);
            if (c->pid[i] > 0 && (strstr(first, p) || strstr(first, q)))
                seen++;
        }
        if (seen < live)
            return 0;
    }
    return 1;
}

int cluster_fx_wait_ok(const struct cluster_fx *c, int timeout_ms)
{
    int64_t deadline = tu_mono_ms() + timeout_ms;
    do {
        if (settled(c, 0))
            return 0;
        tu_sleep_ms(50);
    } while (tu_mono_ms() < deadline);
    return -1;
}

/* ---- starting ----------------------------------------------------------------- */

int cluster_fx_available(char *why, size_t whylen)
{
    char server[PATH_MAX];
    if (tu_redis_find(NULL, server, sizeof server) < 0) {
        snprintf(why, whylen, "redis-server not found (apt-get install redis-server)");
        return -1;
    }
    return 0;
}

/* A free port not yet given to another node of `c` (nor its bus), or -1. */
static int fresh_port(const struct cluster_fx *c, int upto)
{
    for (int tries = 0; tries < 100; tries++) {
        int p = tu_free_port();
        int taken = p < 0;
        for (int i = 0; i < upto && !taken; i++)
            taken = c->port[i] == p || c->bus_port[i] == p;
        if (!taken && (upto == 0 || c->port[upto] != p))
            return p;
    }
    return -1;
}

/* Start node `i` in DIR/nI, cluster mode, no persistence (but after
 * cluster_fx_persist): on new ports
 * the first time, on its ports again after a kill (its nodes.conf then
 * brings it back into the cluster). */
static int start_node(struct cluster_fx *c, const char *server, int i, char *err, size_t errlen)
{
    char dir[140], port[16], bus[16], cert[300], key[300], ca[300];
    snprintf(dir, sizeof dir, "%s/n%d", c->dir, i);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
        return -1;
    }
    snprintf(c->sock[i], sizeof c->sock[i], "%s/redis.sock", dir);
    if (unlink(c->sock[i]) < 0 && errno != ENOENT) {
        snprintf(err, errlen, "%s: %s", c->sock[i], strerror(errno));
        return -1;
    }
    if (c->port[i] == 0) {
        c->port[i] = fresh_port(c, i);
        c->bus_port[i] = c->port[i] < 0 ? -1 : fresh_port(c, i + 1);
    }
    if (c->port[i] < 0 || c->bus_port[i] < 0 || c->bus_port[i] == c->port[i]) {
        snprintf(err, errlen, "no free loopback port");
        return -1;
    }
    snprintf(port, sizeof port, "%d", c->port[i]);
    snprintf(bus, sizeof bus, "%d", c->bus_port[i]);
    snprintf(c->addr[i], sizeof c->addr[i], "127.0.0.1:%d", c->port[i]);
    c->seeds[i] = c->addr[i];
    char *extra[40] = {
        "--bind", "127.0.0.1", "--cluster-enabled", "yes",
        "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
        "--cluster-port", bus, "--cluster-replica-validity-factor", "0",
        "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
        "--repl-ping-replica-period", "1", NULL
    };
    size_t n = 18;
    if (c->tls_dir[0]) {
        snprintf(cert, sizeof cert, "%s/server.crt", c->tls_dir);
        snprintf(key, sizeof key, "%s/server.key", c->tls_dir);
        snprintf(ca, sizeof ca, "%s/ca.crt", c->tls_dir);
        char *tls[] = { "--port", "0", "--tls-port", port, "--tls-cluster", "yes",
                        "--tls-replication", "yes",
                        "--tls-auth-clients", c->client_certs ? "yes" : "no",
                        "--tls-cert-file", cert, "--tls-key-file", key,
                        "--tls-ca-cert-file", ca, NULL };
        for (size_t j = 0; tls[j]; j++)
            extra[n++] = tls[j];
    } else {
        extra[n++] = "--port";
        extra[n++] = port;
    }
    if (c->aof[i]) {
        char *aof[] = { "--appendonly", "yes", "--appendfsync", "always", NULL };
        for (size_t j = 0; aof[j]; j++)
            extra[n++] = aof[j];
    }
    extra[n] = NULL;
    return tu_redis_spawn_with(server, dir, c->sock[i], extra, TU_DIE_WITH_PARENT, &c->pid[i],
                               err, errlen);
}

/* Start every node; distinct config epochs for the masters (as redis-cli
 * does) so that no epoch collision has to be resolved first. */
static int start_nodes(struct cluster_fx *c, char *err, size_t errlen)
{
    char server[PATH_MAX];
    if (tu_redis_find(NULL, server, sizeof server) < 0) {
        snprintf(err, errlen, "redis-server not found");
        return -1;
    }
    for (int i = 0; i < c->nnodes; i++) {
        if (start_node(c, server, i, err, errlen) < 0)
            return -1;
        redisReply *r = cluster_fx_cmd(c, i, "CLUSTER MYID");
        int ok = r && r->type == REDIS_REPLY_STRING && r->len == 40;
        if (ok)
            memcpy(c->id[i], r->str, 41);
        if (r)
            freeReplyObject(r);
        if (!ok) {
            snprintf(err, errlen, "node %d: no CLUSTER MYID (cluster support?)", i);
            return -1;
        }
        if (i < c->nmasters
            && node_ok(c, i, err, errlen, "CLUSTER SET-CONFIG-EPOCH %d", i + 1) < 0)
            return -1;
    }
    return 0;
}

/* Whether every node knows every other, handshakes done. */
static int all_met(const struct cluster_fx *c)
{
    for (int i = 0; i < c->nnodes; i++) {
        char want[64];
        snprintf(want, sizeof want, "cluster_known_nodes:%d", c->nnodes);
        if (!node_says(c, i, "CLUSTER", "INFO", want)
            || node_says(c, i, "CLUSTER", "NODES", "handshake"))
            return 0;
    }
    return 1;
}

/* Slots to the masters evenly, every node meets node 0, replicas follow
 * their masters. */
static int form(struct cluster_fx *c, char *err, size_t errlen)
{
    for (int m = 0; m < c->nmasters; m++) {
        int lo = m * CLUSTER_FX_SLOTS / c->nmasters;
        int hi = (m + 1) * CLUSTER_FX_SLOTS / c->nmasters - 1;
        if (node_ok(c, m, err, errlen, "CLUSTER ADDSLOTSRANGE %d %d", lo, hi) < 0)
            return -1;
    }
    for (int i = 1; i < c->nnodes; i++)
        if (node_ok(c, i, err, errlen, "CLUSTER MEET 127.0.0.1 %d %d", c->port[0],
                    c->bus_port[0]) < 0)
            return -1;
    int64_t deadline = tu_mono_ms() + START_TIMEOUT_MS;
    while (!all_met(c)) {
        if (tu_mono_ms() > deadline) {
            snprintf(err, errlen, "the nodes did not all meet within %d s (see %s/n*/redis.log)",
                     START_TIMEOUT_MS / 1000, c->dir);
            return -1;
        }
        tu_sleep_ms(50);
    }
    for (int m = 0; m < c->nmasters; m++)
        for (int r = 0; r < c->nreplicas; r++) {
            int i = c->nmasters + m * c->nreplicas + r;
            if (node_ok(c, i, err, errlen, "CLUSTER REPLICATE %s", c->id[m]) < 0)
                return -1;
        }
    return 0;
}

/* Every replica's link to its master is up. */
static int replicas_synced(const struct cluster_fx *c)
{
    for (int i = c->nmasters; i < c->nnodes; i++)
        if (!node_says(c, i, "INFO", "replication", "master_link_status:up"))
            return 0;
    return 1;
}

/* Node `idx` requires the password from now on: its replication
 * credentials first, then the user or requirepass. */
static int protect_node(const struct cluster_fx *c, int i, const struct cluster_fx_opts *o,
                        char *err, size_t errlen)
{
    if (o->user && node_ok(c, i, err, errlen, "CONFIG SET masteruser %s", o->user) < 0)
        return -1;
    if (node_ok(c, i, err, errlen, "CONFIG SET masterauth %s", o->password) < 0)
        return -1;
    if (!o->user)
        return node_ok(c, i, err, errlen, "CONFIG SET requirepass %s", o->password);
    if (node_ok(c, i, err, errlen, "ACL SETUSER %s on >%s ~* &* +@all", o->user,
                o->password) < 0)
        return -1;
    return node_ok(c, i, err, errlen, "ACL SETUSER default off");
}

/* Every node requires the password from now on (the fixture's own
 * connections authenticate from then on: c->password is set last). */
static int protect(struct cluster_fx *c, const struct cluster_fx_opts *o, char *err,
                   size_t errlen)
{
    for (int i = 0; i < c->nnodes; i++)
        if (protect_node(c, i, o, err, errlen) < 0)
            return -1;
    snprintf(c->password, sizeof c->password, "%s", o->password);
    snprintf(c->user, sizeof c->user, "%s", o->user ? o->user : "");
    return 0;
}

int cluster_fx_start(struct cluster_fx *c, int masters, int replicas_per_master,
                     const struct cluster_fx_opts *o, char *err, size_t errlen)
{
    static const struct cluster_fx_opts plain;
    if (!o)
        o = &plain;
    memset(c, 0, sizeof *c);
    c->nmasters = masters;
    c->nreplicas = replicas_per_master;
    c->nnodes = masters * (1 + replicas_per_master);
    for (int i = 0; i < CLUSTER_FX_MAX_NODES; i++)
        c->dead_slot[i] = -1;
    if (masters < 1 || replicas_per_master < 0 || c->nnodes > CLUSTER_FX_MAX_NODES) {
        snprintf(err, errlen, "cluster_fx_start: %d masters x %d replicas: at most %d nodes",
                 masters, replicas_per_master, CLUSTER_FX_MAX_NODES);
        return -1;
    }
    if (o->user && !o->password) {
        snprintf(err, errlen, "cluster_fx_start: a user needs a password");
        return -1;
    }
    snprintf(c->tls_dir, sizeof c->tls_dir, "%s", o->tls_dir ? o->tls_dir : "");
    c->client_certs = o->tls_dir && o->client_certs;
    if (tu_make_temp_dir("dqcluster", c->dir, sizeof c->dir, err, errlen) < 0)
        return -1;
    if (start_nodes(c, err, errlen) < 0 || form(c, err, errlen) < 0)
        goto fail;
    int64_t deadline = tu_mono_ms() + START_TIMEOUT_MS;
    while (!settled(c, 1) || !replicas_synced(c)) {
        if (tu_mono_ms() > deadline) {
            snprintf(err, errlen, "the cluster did not settle within %d s (see %s/n*/redis.log)",
                     START_TIMEOUT_MS / 1000, c->dir);
            goto fail;
        }
        tu_sleep_ms(50);
    }
    if (o->password && protect(c, o, err, errlen) < 0)
        goto fail;
    return 0;
fail:
    cluster_fx_stop(c);
    return -1;
}

void cluster_fx_stop(struct cluster_fx *c)
{
    if (c->reshard_pid > 0) {
        kill(c->reshard_pid, SIGKILL);
        waitpid(c->reshard_pid, NULL, 0);
        c->reshard_pid = 0;
    }
    for (int i = 0; i < c->nnodes; i++)
        if (c->pid[i] > 0) {
            kill(c->pid[i], SIGKILL);
            waitpid(c->pid[i], NULL, 0);
            c->pid[i] = 0;
        }
    if (c->dir[0] && tu_remove_tree(c->dir) < 0)
        fprintf(stderr, "could not remove %s: %s\n", c->dir, strerror(errno));
    c->dir[0] = '\0';
}

/* ---- keys and slots ----------------------------------------------------------- */

long long cluster_fx_keys_on(const struct cluster_fx *c, int idx, const char *pattern)
{
    if (!pattern)
        return cluster_fx_int(c, idx, "DBSIZE");
    char err[300];
    redisContext *rc = cluster_fx_connect(c, idx, CMD_TIMEOUT_MS, err, sizeof err);
    if (!rc)
        return -1;
    long long n = 0;
    char cursor[32] = "0";
    do {
        redisReply *r = redisCommand(rc, "SCAN %s MATCH %s COUNT 1000", cursor, pattern);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
            n = -1;
            if (r)
                freeReplyObject(r);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        n += (long long)r->element[1]->elements;
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    redisFree(rc);
    return n;
}

/* MIGRATE the keys of `slot` from `from` to `to` until none is left. */
static int migrate_keys(const struct cluster_fx *c, int slot, int from, int to, char *err,
                        size_t errlen)
{
    for (;;) {
        redisReply *r = cluster_fx_cmd(c, from, "CLUSTER GETKEYSINSLOT %d %d", slot,
                                       MIGRATE_BATCH);
        if (!r || r->type != REDIS_REPLY_ARRAY) {
            snprintf(err, errlen, "node %d: CLUSTER GETKEYSINSLOT %d failed", from, slot);
            if (r)
                freeReplyObject(r);
            return -1;
        }
        size_t n = r->elements;
        if (n == 0) {
            freeReplyObject(r);
            return 0;
        }
        const char *argv[MIGRATE_BATCH + 12];
        size_t lens[MIGRATE_BATCH + 12], k = 0;
        char port[16];
        snprintf(port, sizeof port, "%d", c->port[to]);
        const char *head[] = { "MIGRATE", "127.0.0.1", port, "", "0", "10000" };
        for (size_t j = 0; j < 6; j++)
            argv[k++] = head[j];
        if (c->password[0] && c->user[0]) {
            argv[k++] = "AUTH2";
            argv[k++] = c->user;
            argv[k++] = c->password;
        } else if (c->password[0]) {
            argv[k++] = "AUTH";
            argv[k++] = c->password;
        }
        argv[k++] = "KEYS";
        for (size_t j = 0; j < n; j++)
            argv[k++] = r->element[j]->str;
        for (size_t j = 0; j < k; j++)
            lens[j] = strlen(argv[j]);
        char e2[300];
        redisContext *rc = cluster_fx_connect(c, from, CMD_TIMEOUT_MS * 3, e2, sizeof e2);
        redisReply *m = rc ? redisCommandArgv(rc, (int)k, argv, lens) : NULL;
        int ok = m && m->type == REDIS_REPLY_STATUS;
        if (!ok)
            snprintf(err, errlen, "node %d: MIGRATE of slot %d to node %d: %s", from, slot, to,
                     m && m->type == REDIS_REPLY_ERROR ? m->str : rc ? rc->errstr : e2);
        if (m)
            freeReplyObject(m);
        if (rc)
            redisFree(rc);
        freeReplyObject(r);
        if (!ok)
            return -1;
    }
}

int cluster_fx_move_slot(struct cluster_fx *c, int slot, int to, char *err, size_t errlen)
{
    int from = cluster_fx_master_of_slot(c, slot);
    if (from < 0) {
        snprintf(err, errlen, "slot %d: no master serves it", slot);
        return -1;
    }
    if (from == to)
        return 0;
    if (node_ok(c, to, err, errlen, "CLUSTER SETSLOT %d IMPORTING %s", slot, c->id[from]) < 0
        || node_ok(c, from, err, errlen, "CLUSTER SETSLOT %d MIGRATING %s", slot, c->id[to]) < 0
        || migrate_keys(c, slot, from, to, err, errlen) < 0)
        return -1;
    /* The new owner first, then the old (which then redirects with MOVED),
     * then every other master, as redis-cli does. */
    if (node_ok(c, to, err, errlen, "CLUSTER SETSLOT %d NODE %s", slot, c->id[to]) < 0
        || node_ok(c, from, err, errlen, "CLUSTER SETSLOT %d NODE %s", slot, c->id[to]) < 0)
        return -1;
    for (int i = 0; i < c->nnodes; i++) {
        if (i == to || i == from || c->pid[i] <= 0
            || node_says(c, i, "INFO", "replication", "role:slave"))
            continue;
        redisReply *r = cluster_fx_cmd(c, i, "CLUSTER SETSLOT %d NODE %s", slot, c->id[to]);
        if (r)
            freeReplyObject(r);
    }
    return 0;
}

int cluster_fx_move_slots(struct cluster_fx *c, int from, int to, int nslots, char *err,
                          size_t errlen)
{
    static int owner[CLUSTER_FX_SLOTS];
    static char text[16384];
    int asked = -1;
    for (int i = 0; i < c->nnodes && asked < 0; i++)
        if (c->pid[i] > 0 && slots_text(c, i, text, sizeof text, owner) == 0)
            asked = i;
    if (asked < 0) {
        snprintf(err, errlen, "no node answers CLUSTER SLOTS");
        return -1;
    }
    int moved = 0;
    for (int s = 0; s < CLUSTER_FX_SLOTS && moved < nslots; s++)
        if (owner[s] == from) {
            if (cluster_fx_move_slot(c, s, to, err, errlen) < 0)
                return -1;
            moved++;
        }
    if (moved < nslots) {
        snprintf(err, errlen, "node %d serves only %d slots", from, moved);
        return -1;
    }
    return 0;
}

int cluster_fx_reshard_start(struct cluster_fx *c, const int *slots, size_t n, int to,
                             int pause_ms, char *err, size_t errlen)
{
    int *tos = calloc(n ? n : 1, sizeof *tos);
    if (!tos) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        tos[i] = to;
    int rc = cluster_fx_reshard_start_to(c, slots, tos, n, pause_ms, err, errlen);
    free(tos);
    return rc;
}

int cluster_fx_reshard_start_to(struct cluster_fx *c, const int *slots, const int *to,
                                size_t n, int pause_ms, char *err, size_t errlen)
{
    if (c->reshard_pid > 0) {
        snprintf(err, errlen, "a reshard runs already");
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid > 0) {
        c->reshard_pid = pid;
        return 0;
    }
    tu_child_prepare(TU_DIE_WITH_PARENT);
    for (size_t i = 0; i < n; i++) {
        char e[400];
        if (cluster_fx_move_slot(c, slots[i], to[i], e, sizeof e) < 0) {
            fprintf(stderr, "reshard: %s\n", e);
            _exit(1);
        }
        tu_sleep_ms(pause_ms);
    }
    _exit(0);
}

int cluster_fx_reshard_wait(struct cluster_fx *c, char *err, size_t errlen)
{
    int status;
    if (c->reshard_pid <= 0) {
        snprintf(err, errlen, "no reshard runs");
        return -1;
    }
    pid_t got = waitpid(c->reshard_pid, &status, 0);
    c->reshard_pid = 0;
    if (got < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(err, errlen, "the reshard failed (its reason is on stderr)");
        return -1;
    }
    return 0;
}

/* ---- failover ------------------------------------------------------------------ */

void cluster_fx_kill(struct cluster_fx *c, int idx)
{
    if (idx < 0 || idx >= c->nnodes || c->pid[idx] <= 0)
        return;
    static int owner[CLUSTER_FX_SLOTS];
    static char text[16384];
    c->dead_slot[idx] = -1;
    if (slots_text(c, idx, text, sizeof text, owner) == 0)
        for (int s = 0; s < CLUSTER_FX_SLOTS && c->dead_slot[idx] < 0; s++)
            if (owner[s] == idx)
                c->dead_slot[idx] = s;
    kill(c->pid[idx], SIGKILL);
    waitpid(c->pid[idx], NULL, 0);
    c->pid[idx] = 0;
}

/* Start killed node `idx` again on its ports, with the password the
 * others require.  0, or -1 with the reason. */
static int start_again(struct cluster_fx *c, int idx, char *err, size_t errlen)
{
    char server[PATH_MAX];
    if (c->pid[idx] > 0) {
        snprintf(err, errlen, "node %d runs", idx);
        return -1;
    }
    if (tu_redis_find(NULL, server, sizeof server) < 0) {
        snprintf(err, errlen, "redis-server not found");
        return -1;
    }
    if (start_node(c, server, idx, err, errlen) < 0)
        return -1;
    /* The password the others require (CONFIG SET went with the process);
     * the new process has none yet, so the fixture's connection to it must
     * not authenticate. */
    if (c->password[0]) {
        char saved[sizeof c->password];
        snprintf(saved, sizeof saved, "%s", c->password);
        struct cluster_fx_opts o = { .password = saved, .user = c->user[0] ? c->user : NULL };
        c->password[0] = '\0';
        int rc = protect_node(c, idx, &o, err, errlen);
        snprintf(c->password, sizeof c->password, "%s", saved);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int cluster_fx_persist(struct cluster_fx *c, int idx, char *err, size_t errlen)
{
    c->aof[idx] = 1;
    if (cluster_fx_int(c, idx, "CONFIG SET appendfsync always") < 0
        || cluster_fx_int(c, idx, "CONFIG SET appendonly yes") < 0) {
        snprintf(err, errlen, "node %d refused CONFIG SET appendonly", idx);
        return -1;
    }
    int64_t deadline = tu_mono_ms() + START_TIMEOUT_MS;
    while (!node_says(c, idx, "INFO", "persistence", "aof_rewrite_in_progress:0")
           || !node_says(c, idx, "INFO", "persistence", "aof_rewrite_scheduled:0")
           || !node_says(c, idx, "INFO", "persistence", "aof_enabled:1")) {
        if (tu_mono_ms() > deadline) {
            snprintf(err, errlen, "node %d did not write its append-only file", idx);
            return -1;
        }
        tu_sleep_ms(20);
    }
    return 0;
}

int cluster_fx_restart_master(struct cluster_fx *c, int idx, char *err, size_t errlen)
{
    if (start_again(c, idx, err, errlen) < 0)
        return -1;
    if (cluster_fx_wait_ok(c, START_TIMEOUT_MS) < 0) {
        snprintf(err, errlen, "node %d came back but the cluster is not ok (see %s/n%d/redis.log)",
                 idx, c->dir, idx);
        return -1;
    }
    return 0;
}

int cluster_fx_restart(struct cluster_fx *c, int idx, char *err, size_t errlen)
{
    if (start_again(c, idx, err, errlen) < 0)
        return -1;
    int64_t deadline = tu_mono_ms() + START_TIMEOUT_MS;
    while (!node_says(c, idx, "INFO", "replication", "master_link_status:up")) {
        if (tu_mono_ms() > deadline) {
            snprintf(err, errlen, "node %d did not come back as a replica (see %s/n%d/redis.log)",
                     idx, c->dir, idx);
            return -1;
        }
        tu_sleep_ms(50);
    }
    return 0;
}

int cluster_fx_wait_promoted(struct cluster_fx *c, int idx, int timeout_ms)
{
    int slot = c->dead_slot[idx];
    if (slot < 0)
        return -1;
    int64_t deadline = tu_mono_ms() + timeout_ms;
    do {
        if (settled(c, 0)) {
            int m = cluster_fx_master_of_slot(c, slot);
            if (m >= 0 && m != idx && c->pid[m] > 0)
                return m;
        }
        tu_sleep_ms(50);
    } while (tu_mono_ms() < deadline);
    return -1;
}
