/*
 * The outbox run's environment (bench/outbox_env.h): the bench's
 * PostgreSQL helpers, delayqd with one postgres source, the CPU samples,
 * the relay's statements from pg_stat_statements.  The measurements are
 * in run_outbox.c.
 */
#include "config.h"

#ifdef HAVE_LIBPQ

#include <errno.h>
#include <libpq-fe.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "bench/bench.h"
#include "bench/daemon_proc.h"
#include "bench/measure.h"
#include "bench/outbox_env.h"
#include "outbox/outbox_sql.h"
#include "tests/testutil.h"

#define WORKERS 2
#define READY_TIMEOUT_US (20 * 1000000LL)
#define RELAY_APP "delayqd relay"   /* its application_name (relay_pg.c) */
#define LEAD_LINE "holds the table's lock"

/* ---- PostgreSQL ------------------------------------------------------------ */

PGresult *oenv_sql_run(PGconn *c, const char *sql, char *err, size_t errlen)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return r;
    snprintf(err, errlen, "postgres: %.80s: %s", sql, PQerrorMessage(c));
    err[strcspn(err, "\n")] = '\0';
    PQclear(r);
    return NULL;
}

int oenv_sql_ok(PGconn *c, const char *sql, char *err, size_t errlen)
{
    PGresult *r = oenv_sql_run(c, sql, err, errlen);
    int rc = r ? 0 : -1;
    PQclear(r);
    return rc;
}

int oenv_sql_long(PGconn *c, const char *sql, long long *out, char *err, size_t errlen)
{
    PGresult *r = oenv_sql_run(c, sql, err, errlen);
    if (!r)
        return -1;
    int ok = PQntuples(r) > 0;
    *out = ok ? atoll(PQgetvalue(r, 0, 0)) : 0;
    PQclear(r);
    if (!ok)
        snprintf(err, errlen, "postgres: %.80s: no row", sql);
    return ok ? 0 : -1;
}

static void quiet(void *arg, const char *message)
{
    (void)arg, (void)message;
}

PGconn *oenv_pg_connect(const char *conninfo, char *err, size_t errlen)
{
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) == CONNECTION_OK) {
        PQsetNoticeProcessor(c, quiet, NULL);
        return c;
    }
    snprintf(err, errlen, "postgres: connect: %s", c ? PQerrorMessage(c) : "out of memory");
    err[strcspn(err, "\n")] = '\0';
    PQfinish(c);
    return NULL;
}

int oenv_load_ddl(struct octx *x, char *err, size_t errlen)
{
    char *sql = outbox_sql_string(OUTBOX_DEFAULT_SCHEMA, OUTBOX_DEFAULT_TABLE);
    if (!sql) {
        snprintf(err, errlen, "outbox DDL: %s", strerror(errno));
        return -1;
    }
    int rc = oenv_sql_ok(x->conn, sql, err, errlen);
    free(sql);
    return rc;
}

/* ---- the daemon -------------------------------------------------------------- */

/* daemon_proc.c's configuration (it takes no sources) with the source at
 * `batch`, as the role "relay".  0, or -1 (err). */
static int write_conf(const struct octx *x, int batch, char *err, size_t errlen)
{
    FILE *fp = fopen(x->daemon.conf, "w");
    if (!fp) {
        snprintf(err, errlen, "%s: %s", x->daemon.conf, strerror(errno));
        return -1;
    }
    fprintf(fp,
            "redis = { unix_socket = \"%s\"; };\n"
            "handler_dir = \"%s\";\n"
            "log = { level = \"info\"; target = \"stderr\"; };\n"
            "shutdown_timeout = \"10s\";\n"
            "queues = ( { name = \"" BENCH_QUEUE "\"; workers = %d; batch = 16;\n"
            "             lease = \"60s\"; max_attempts = 3; } );\n"
            "handlers = ( { type = \"*\"; file = \"noop.so\"; timeout = \"10s\"; } );\n"
            "sources = ( { type = \"postgres\"; conninfo = \"%s\"; batch = %d;\n"
            "              poll_interval = \"2s\"; } );\n",
            x->redis.sock, x->env->handler_dir, WORKERS, x->relay_conninfo, batch);
    if (fclose(fp) != 0) {
        snprintf(err, errlen, "%s: %s", x->daemon.conf, strerror(errno));
        return -1;
    }
    return 0;
}

/* The pid of the relay child from its "... holds the table's lock" line
 * ("[relay0 PID] ..."); 0 while there is none. */
static pid_t relay_from_log(const char *log)
{
    FILE *fp = fopen(log, "r");
    if (!fp)
        return 0;
    char line[1024];
    int pid = 0;
    while (fgets(line, sizeof line, fp)) {
        const char *tag = strstr(line, "[relay");
        if (tag && strstr(line, LEAD_LINE) && sscanf(tag, "[relay%*u %d]", &pid) != 1)
            pid = 0;
    }
    fclose(fp);
    return pid;
}

/* The backend of the relay's connection, when there is exactly one and it
 * is not `old` (the previous daemon's, which may linger a moment). */
static pid_t relay_backend(struct octx *x, pid_t old)
{
    char err[300];
    PGresult *r = oenv_sql_run(x->conn, "SELECT pid FROM pg_stat_activity WHERE "
                               "application_name = '" RELAY_APP "'", err, sizeof err);
    pid_t pid = 0;
    if (r && PQntuples(r) == 1)
        pid = (pid_t)atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    return pid == old ? 0 : pid;
}

/* Whether the daemon is in its steady state: workers and reaper (the
 * bench's usual test), the relay leading, its backend known. */
static int daemon_ready(struct octx *x, pid_t old_backend)
{
    if (!tu_delayqd_ready(x->rc, WORKERS))
        return 0;
    if (!x->relay && !(x->relay = relay_from_log(x->daemon.log)))
        return 0;
    x->backend = relay_backend(x, old_backend);
    return x->backend > 0;
}

void oenv_daemon_stop(struct octx *x)
{
    daemon_proc_stop(&x->daemon, 15000);
    x->relay = 0;
}

int oenv_daemon_start(struct octx *x, int batch, char *err, size_t errlen)
{
    pid_t old_backend = x->backend;
    oenv_daemon_stop(x);
    snprintf(x->daemon.conf, sizeof x->daemon.conf, "%s/delayqd.conf", x->redis.dir);
    snprintf(x->daemon.log, sizeof x->daemon.log, "%s/delayqd-%d-b%d.log", x->redis.dir,
             ++x->starts, batch);
    if (write_conf(x, batch, err, errlen) < 0)
        return -1;
    char *const argv[] = { (char *)x->env->delayqd, "-f", "-c", x->daemon.conf, NULL };
    x->daemon.pid = tu_spawn(argv, x->daemon.log, TU_DIE_WITH_PARENT, err, errlen);
    if (x->daemon.pid < 0) {
        x->daemon.pid = 0;
        return -1;
    }
    int64_t deadline = bench_mono_us() + READY_TIMEOUT_US;
    while (!daemon_ready(x, old_backend)) {
        int status;
        if (waitpid(x->daemon.pid, &status, WNOHANG) == x->daemon.pid
            || bench_mono_us() > deadline || bench_interrupted) {
            char why[600];
            daemon_proc_last_problem(&x->daemon, why, sizeof why);
            snprintf(err, errlen, "delayqd with a source did not get ready%s%s (log %s)",
                     why[0] ? ": " : "", why, x->daemon.log);
            return -1;
        }
        bench_sleep_ms(20);
    }
    return 0;
}

/* ---- CPU ------------------------------------------------------------------------ */

void oenv_sample(const struct octx *x, struct osample *s)
{
    s->wall_us = bench_mono_us();
    s->relay = measure_proc_cpu_us(x->relay, NULL);
    s->backend = measure_proc_cpu_us(x->backend, NULL);
    s->pg_all = measure_tree_cpu_us(x->pg.pid, NULL);
    s->own_backend = measure_proc_cpu_us(x->own_backend, NULL);
    s->daemon = measure_tree_cpu_us(x->daemon.pid, NULL);
    s->redis = measure_proc_cpu_us(x->redis.pid, NULL);
}

int oenv_same_relay(const struct osample *a, const struct osample *b, char *err,
                    size_t errlen)
{
    if (a->relay >= 0 && b->relay >= a->relay && a->backend >= 0 && b->backend >= a->backend)
        return 0;
    snprintf(err, errlen, "the relay or its PostgreSQL backend restarted during the run");
    return -1;
}

/* ---- the relay's statements (pg_stat_statements) ------------------------------- */

int oenv_stmt_reset(struct octx *x, char *err, size_t errlen)
{
    return x->pgss ? oenv_sql_ok(x->conn, "SELECT pg_stat_statements_reset()", err, errlen)
                   : 0;
}

int oenv_stmt_read(struct octx *x, struct stmt_time *t, char *err, size_t errlen)
{
    t->take = t->del = t->commit = t->other = t->takes = x->pgss ? 0 : NAN;
    if (!x->pgss)
        return 0;
    PGresult *r = oenv_sql_run(x->conn, "SELECT CASE WHEN query LIKE 'SELECT id, op, queue%' "
                               "THEN 't' WHEN query LIKE 'DELETE %' THEN 'd' WHEN query = "
                               "'COMMIT' THEN 'c' ELSE 'o' END, sum(total_plan_time + "
                               "total_exec_time), sum(calls) FROM pg_stat_statements WHERE "
                               "userid = 'relay'::regrole GROUP BY 1", err, errlen);
    for (int i = 0; r && i < PQntuples(r); i++) {
        char k = PQgetvalue(r, i, 0)[0];
        double ms = strtod(PQgetvalue(r, i, 1), NULL);
        *(k == 't' ? &t->take : k == 'd' ? &t->del : k == 'c' ? &t->commit : &t->other) = ms;
        if (k == 't')
            t->takes = strtod(PQgetvalue(r, i, 2), NULL);
    }
    int rc = r ? 0 : -1;
    PQclear(r);
    return rc;
}

void oenv_stmt_note(const struct stmt_time *t, double rows, char *out, size_t len)
{
    if (isnan(t->take)) {
        snprintf(out, len, "stmt_us/row=? (no pg_stat_statements)");
        return;
    }
    double k = 1000.0 / rows;
    snprintf(out, len, "stmt_us/row=%.1f (take %.1f delete %.1f commit %.1f other %.1f) "
             "takes/row=%.3g", (t->take + t->del + t->commit + t->other) * k, t->take * k,
             t->del * k, t->commit * k, t->other * k, t->takes / rows);
}

#endif
