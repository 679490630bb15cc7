/*
 * dconfig_types: the daemon's configuration as loaded (dconfig.h loads,
 * frees and asks it).  Apart so that the readers of its groups
 * (dconfig_admin.c, dconfig_sched.c), which dconfig.c calls, fill it
 * without including dconfig.h back.
 */
#ifndef DQ_DCONFIG_TYPES_H
#define DQ_DCONFIG_TYPES_H

#include <delayq/client.h>
#include <libconfig.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "config/redis_conf.h"

#define DCONFIG_MAX_QUEUES 64
#define DCONFIG_MAX_WORKERS 256     /* over all queues */
#define DCONFIG_MAX_SOURCES 8       /* outboxes relayed (dconfig_sources.h) */
/* The handler entry's type that takes every type without an entry of its
 * own.  Never a job's type: keys_check_type refuses it. */
#define DCONFIG_FALLBACK_TYPE "*"
/* A handler entry's cancel_grace when it names none. */
#define DCONFIG_CANCEL_GRACE_MS 2000

struct queue_conf {
    char *name;
    int workers;                /* processes claiming from this queue */
    int64_t lease_ms;           /* claim lease; longer than any timeout */
    int batch;                  /* jobs per claim */
    dq_retry_policy retry;      /* backoff and default max attempts */
    int partitions;             /* key partitions, 1..KEYS_PARTITIONS_MAX */
    bool partitions_set;        /* named in the file; otherwise the count
                                   stored in Redis is taken at start
                                   (qparts_record.h) */
    int line;
};

struct handler_conf {
    char *type;                 /* a job type, or "*" for every other type */
    char *file;                 /* .so, relative to handler_dir unless absolute */
    int64_t timeout_ms;         /* the handler is stopped after this */
    int64_t cancel_grace_ms;    /* cancelled while running: its worker is
                                   stopped if the handler has not returned
                                   this long after (cancel_board.h) */
    int max_attempts;           /* 0: the queue's */
    const config_setting_t *settings; /* the handler's own group, or NULL */
    int line;
};

struct daemon_conf {
    config_t cfg;               /* kept: settings point into it */
    char *path;
    struct redis_conf redis;
    struct queue_conf *queues;
    size_t nqueues;
    struct handler_conf *handlers;
    size_t nhandlers;
    struct sched_conf *schedules; /* dconfig_sched.h */
    size_t nschedules;
    struct source_conf *sources; /* dconfig_sources.h: outboxes relayed */
    size_t nsources;
    char *handler_dir;
    int64_t shutdown_timeout_ms;
    int64_t reaper_interval_ms; /* longest sleep between reaps */
    int reaper_batch;
    int64_t fsck_interval_ms;   /* reaper: a fsck pass per queue this often; 0 off */
    int log_level;
    int log_syslog;             /* 1: syslog, 0: stderr */
    /* metrics = { listen = "HOST:PORT"; allow_remote = false; }: where the
     * supervisor serves /metrics and /healthz; off when listen is NULL. */
    char *metrics_listen;
    struct sockaddr_storage metrics_addr;   /* metrics_listen, parsed */
    socklen_t metrics_addrlen;
    /* metrics.claim_failure_grace: /healthz turns 503 once a worker's
     * claims have failed for longer than this (a demoted Redis). */
    int64_t claim_failure_grace_ms;
    /* admin.ui = true: the dashboard under /ui/ (ui.h); it needs
     * credentials, read from the files token_file and basic_auth_file
     * (their content here; NULL: that file is not configured). */
    int admin_ui;
    int admin_read_only;        /* admin.read_only: pages yes, actions 403 */
    char *admin_token;          /* token_file's token */
    char *admin_basic;          /* basic_auth_file's "user:password" */
    /* The admin listener's limits (http_conns.h) and the names it answers
     * to (host_allow.h): admin.request_timeout (the whole request, headers
     * and body), admin.max_connections, admin.max_connections_per_address
     * (below max_connections), admin.hosts; and admin.session_lifetime,
     * a dashboard session's absolute limit. */
    int64_t admin_request_timeout_ms;
    int admin_max_conns;
    int admin_max_conns_per_address;
    char **admin_hosts;         /* lower case, brackets of IPv6 dropped */
    size_t nadmin_hosts;
    int64_t admin_session_lifetime_ms;
};

#endif
