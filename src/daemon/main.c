/*
 * delayqd: arguments, configuration, hand-off to the supervisor.
 *
 *   delayqd -c FILE [-t] [-f]
 *
 * Exit codes (sysexits): 0 stopped cleanly / configuration OK; 64 usage;
 * 69 Redis unreachable while a partitioned queue's count must be recorded;
 * 71 could not set up; 78 configuration error (or a partition count Redis
 * refuses).
 */
#include "config.h"

#include <event2/event.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/dconfig.h"
#include "daemon/dconfig_sources.h"
#include "daemon/exitcodes.h"
#include "daemon/worker/handlers.h"
#include "daemon/log.h"
#ifdef HAVE_LIBPQ
#include "daemon/relay/relay_pg.h"
#endif
#include "daemon/supervisor/qparts_record.h"
#include "redis/redis_check.h"
#include "daemon/supervisor/supervisor.h"
#include "redis/redis_conn.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

/*
 * libevent's own messages, in the daemon's log with its role and pid.  One
 * is expected and harmless: a child adding a signal event (a Sentinel
 * connection's SIGUSR2, rconn.c) to its own loop while the supervisor's
 * loop it inherited, and never runs, holds signal events is told "Added a
 * signal to event base ... Only one can have signals at a time"; the last
 * added wins, which is the child's own loop, as wanted.  It goes to debug.
 */
static void on_libevent_log(int severity, const char *msg)
{
    int level = severity == EVENT_LOG_DEBUG ? DQ_LOG_DEBUG
                : severity == EVENT_LOG_MSG ? DQ_LOG_INFO
                : severity == EVENT_LOG_WARN ? DQ_LOG_WARN : DQ_LOG_ERR;
    if (strncmp(msg, "Added a signal to event base", 28) == 0)
        level = DQ_LOG_DEBUG;
    log_msg(level, "libevent: %s", msg);
}

static void usage(FILE *to)
{
    fprintf(to,
            "usage: delayqd [-c FILE] [-t] [-f]\n"
            "  -c FILE   configuration (default " SYSCONFDIR "/delayq/delayqd.conf)\n"
            "  -t        check the configuration and every handler, then exit\n"
            "  -f        stay in the foreground (as under systemd)\n"
            "  -h        this help; -V the version\n"
            "exit codes: 0 ok, 64 usage, 69 redis unavailable, 71 cannot set up,\n"
            "            78 configuration error\n");
}

/* Detach from the terminal: the classic double fork, a new session, and
 * standard input and output on /dev/null. */
static int daemonize(void)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0)
        _exit(0);
    if (setsid() < 0)
        return -1;
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0)
        _exit(0);
    if (chdir("/") < 0)
        return -1;
    if (!freopen("/dev/null", "r", stdin) || !freopen("/dev/null", "w", stdout))
        return -1;
    return 0;
}

/* The configuration in one glance, once at start: queues, handlers with
 * their ABI versions, and Redis's address (never its password). */
static void log_summary(const struct daemon_conf *conf, const struct handler_table *t)
{
    const struct redis_conf *r = &conf->redis;
    char addr[300];
    redis_conn_format_addr(r->unix_socket, r->host, r->port, addr, sizeof addr);
    if (r->sentinel.master)
        snprintf(addr, sizeof addr, "master '%s' of the sentinels %s%s", r->sentinel.master,
                 r->sentinel.nodes[0], r->sentinel.nnodes > 1 ? ", ..." : "");
    else if (r->cluster) {
        char seed[260];
        snprintf(seed, sizeof seed, "%.250s", r->nnodes ? r->nodes[0] : addr);
        snprintf(addr, sizeof addr, "cluster (seeds %s%s)", seed, r->nnodes > 1 ? ", ..." : "");
    }
    log_info("starting: config %s, redis %s db %d", conf->path, addr, r->db);
    for (size_t i = 0; i < conf->nqueues; i++) {
        const struct queue_conf *q = &conf->queues[i];
        log_info("queue %s: %d worker%s, lease %llds, batch %d, max attempts %d", q->name,
                 q->workers, q->workers == 1 ? "" : "s", (long long)q->lease_ms / 1000,
                 q->batch, q->retry.default_max_attempts);
    }
    for (size_t i = 0; i < t->n; i++) {
        const struct handler_entry *e = &t->entries[i];
        log_info("handler %s: %s (%s, ABI %d), timeout %lldms", e->conf->type,
                 e->lh.path, handler_name(&e->lh), e->lh.desc->abi_version,
                 (long long)e->conf->timeout_ms);
    }
}

/* A queue whose group names partitions > 1. */
static int any_partitioned(const struct daemon_conf *conf)
{
    for (size_t i = 0; i < conf->nqueues; i++)
        if (conf->queues[i].partitions_set && conf->queues[i].partitions > 1)
            return 1;
    return 0;
}

/* -t: a partition count Redis holds differently, over jobs, is a
 * configuration error; Redis out of reach is only noted (a configuration
 * is often checked where its Redis is not). */
static int check_partitions(struct daemon_conf *conf)
{
    char err[800];
    enum qparts_outcome out = qparts_record(conf, 1, err, sizeof err);
    if (out == QPARTS_REFUSED) {
        fprintf(stderr, "delayqd: %s\n", err);
        return DAEMON_EXIT_CONFIG;
    }
    if (out == QPARTS_UNREACHABLE && any_partitioned(conf))
        fprintf(stderr, "delayqd: partition counts not checked: %s\n", err);
    return 0;
}

/* -t: each source's relay can log in, its tables have the relay's columns
 * and its role the grants it needs, when the database can be reached (a
 * configuration is often checked where its database is not: that is only
 * noted). */
static int check_sources(const struct daemon_conf *conf)
{
#ifdef HAVE_LIBPQ
    for (size_t i = 0; i < conf->nsources; i++) {
        const struct source_conf *sc = &conf->sources[i];
        char why[800];
        int rc = relay_pg_check(sc, why, sizeof why);
        if (rc < 0) {
            fprintf(stderr, "delayqd: %s:%d: sources.[%zu] (%s): %s\n", conf->path,
                    sc->line, i, sc->name, why);
            return DAEMON_EXIT_CONFIG;
        }
        if (rc > 0)
            fprintf(stderr, "delayqd: source %s not checked: %s\n", sc->name, why);
    }
#else
    (void)conf;
#endif
    return 0;
}

/* Start-up: each queue's partition count is recorded in Redis, or taken
 * from it when the file names none, before any worker claims.  A refusal
 * stops the daemon (78).  Redis out of reach stops it only when a queue
 * names partitions > 1 (69): its producers would otherwise enqueue into
 * the unpartitioned keys no worker reads; the others run with 1, and say
 * so. */
static int record_partitions(struct daemon_conf *conf)
{
    char err[800];
    enum qparts_outcome out = qparts_record(conf, 0, err, sizeof err);
    if (out == QPARTS_REFUSED) {
        log_err("%s", err);
        return DAEMON_EXIT_CONFIG;
    }
    if (out == QPARTS_UNREACHABLE && any_partitioned(conf)) {
        log_err("cannot record the partition counts of the queues: %s", err);
        return DAEMON_EXIT_UNAVAILABLE;
    }
    if (out == QPARTS_UNREACHABLE)
        log_warn("partition counts not checked: %s; queues without 'partitions' run with "
                 "1 (restart delayqd once Redis answers if one is stored with more)", err);
    for (size_t i = 0; i < conf->nqueues && out == QPARTS_OK; i++) {
        const struct queue_conf *q = &conf->queues[i];
        if (!q->partitions_set && q->partitions > 1)
            log_info("queue %s: %d partitions, the count stored in Redis (its group names "
                     "none)", q->name, q->partitions);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = SYSCONFDIR "/delayq/delayqd.conf";
    int check_only = 0, foreground = 0;
    int opt;
    while ((opt = getopt(argc, argv, "c:tfhV")) != -1) {
        switch (opt) {
        case 'c': path = optarg; break;
        case 't': check_only = 1; break;
        case 'f': foreground = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("delayqd %s\n", PACKAGE_VERSION); return 0;
        default: usage(stderr); return DAEMON_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "delayqd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return DAEMON_EXIT_USAGE;
    }
    struct handler_table handlers;
    char err[800];
    struct daemon_conf *conf = handlers_load_config(path, &handlers, err, sizeof err);
    if (!conf) {
        fprintf(stderr, "delayqd: %s\n", err);
        return DAEMON_EXIT_CONFIG;
    }
    char exposed[600];
    int secret_exposed = redis_conf_secret_exposed(&conf->redis, exposed, sizeof exposed);
    if (check_only) {
        if (secret_exposed)
            fprintf(stderr, "delayqd: %s\n", exposed);
        handlers_close(&handlers);
        int bad = check_partitions(conf);
        if (!bad)
            bad = check_sources(conf);
        if (bad) {
            dconfig_free(conf);
            free(conf);
            return bad;
        }
        char sources[32] = "";
        if (conf->nsources)
            snprintf(sources, sizeof sources, ", %zu source%s", conf->nsources,
                     conf->nsources == 1 ? "" : "s");
        printf("delayqd: %s: configuration OK (%zu queue%s, %zu handler%s%s)\n", path,
               conf->nqueues, conf->nqueues == 1 ? "" : "s", conf->nhandlers,
               conf->nhandlers == 1 ? "" : "s", sources);
        dconfig_free(conf);
        free(conf);
        return 0;
    }
    int to_syslog = conf->log_syslog || !foreground;
    log_setup(to_syslog ? LOG_TO_SYSLOG : LOG_TO_STDERR, conf->log_level);
    event_set_log_callback(on_libevent_log);
    if (!foreground && daemonize() < 0) {
        perror("delayqd: daemonize");
        return DAEMON_EXIT_OSERR;
    }
    log_summary(conf, &handlers);
    if (secret_exposed)
        log_warn("%s", exposed);
    /* Each worker loads its own copy after fork; this one only checked. */
    handlers_close(&handlers);
    redis_check_server(&conf->redis);
    int refused = record_partitions(conf);
    if (refused) {
        dconfig_free(conf);
        free(conf);
        return refused;
    }
    return supervisor_run(conf, path);
}
