/*
 * The subscriptions to +switch-master (see sentinel_watch.h).
 */
#include "redis/sentinel_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "redis/rconn.h"
#include "redis/sentinel.h"

#define SWITCH_CHANNEL "+switch-master"

struct sentinel_watch {
    char *master;
    struct rconn *conns[SENTINEL_MAX_NODES];
    size_t nconns;
    void (*on_move)(void *arg);
    void *arg;
    char last[SENTINEL_HOST_MAX + 8];   /* the last new address announced */
};

/*
 * "+switch-master" says "NAME OLD-IP OLD-PORT NEW-IP NEW-PORT".  A move of
 * our master to an address not announced yet is a failover: logged, and
 * told to the owner.
 */
static void on_switch(struct rconn *rc, const char *channel, const char *payload, size_t len,
                      void *arg)
{
    (void)rc;
    (void)channel;
    struct sentinel_watch *w = arg;
    char name[256], old_ip[SENTINEL_HOST_MAX], new_ip[SENTINEL_HOST_MAX], msg[600];
    int old_port, new_port;
    snprintf(msg, sizeof msg, "%.*s", (int)len, payload);
    if (sscanf(msg, "%255s %255s %d %255s %d", name, old_ip, &old_port, new_ip, &new_port)
            != 5
        || strcmp(name, w->master) != 0)
        return;
    char now[sizeof w->last];
    snprintf(now, sizeof now, "%s:%d", new_ip, new_port);
    if (strcmp(now, w->last) == 0)
        return;
    snprintf(w->last, sizeof w->last, "%s", now);
    log_warn("sentinel: master '%s' moved from %s:%d to %s; every connection follows",
             w->master, old_ip, old_port, now);
    w->on_move(w->arg);
}

/* A subscribed connection to sentinel `node`, with the sentinels'
 * credentials and the connect timeout capped as for lookups. */
static struct rconn *watch_one(struct event_base *base, const struct redis_conf *conf,
                               const char *node, struct sentinel_watch *w)
{
    char host[SENTINEL_HOST_MAX];
    int port;
    const char *why;
    if (sentinel_parse_node(node, host, sizeof host, &port, &why) < 0) {
        log_err("sentinel '%s': %s", node, why);
        return NULL;
    }
    dq_options opt;
    redis_conf_to_options(conf, &opt);
    opt.sentinel = (dq_sentinel_options){ 0 };
    opt.host = host;
    opt.port = port;
    opt.unix_path = NULL;
    opt.user = conf->sentinel.user;
    opt.password = conf->sentinel.password;
    opt.db = 0;
    if (opt.connect_timeout_ms > SENTINEL_TIMEOUT_MS)
        opt.connect_timeout_ms = SENTINEL_TIMEOUT_MS;
    struct rconn *rc = rconn_new(base, &opt, "sentinel", NULL);
    if (rc) {
        rconn_subscribe(rc, SWITCH_CHANNEL, on_switch, w);
        rconn_start(rc);
    }
    return rc;
}

struct sentinel_watch *sentinel_watch_new(struct event_base *base,
                                          const struct redis_conf *conf,
                                          void (*on_move)(void *arg), void *arg)
{
    struct sentinel_watch *w = calloc(1, sizeof *w);
    if (!w || !(w->master = strdup(conf->sentinel.master))) {
        log_err("sentinel: out of memory");
        free(w);
        return NULL;
    }
    w->on_move = on_move;
    w->arg = arg;
    for (size_t i = 0; i < conf->sentinel.nnodes && i < SENTINEL_MAX_NODES; i++) {
        if (!(w->conns[w->nconns] = watch_one(base, conf, conf->sentinel.nodes[i], w))) {
            sentinel_watch_free(w);
            return NULL;
        }
        w->nconns++;
    }
    return w;
}

void sentinel_watch_free(struct sentinel_watch *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nconns; i++)
        rconn_free(w->conns[i]);
    free(w->master);
    free(w);
}
