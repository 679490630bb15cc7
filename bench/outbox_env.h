/*
 * The environment of the outbox run (bench/run_outbox.c, --only outbox):
 * the bench's PostgreSQL helpers, the real delayqd with one postgres
 * source (its configuration, its start until the relay leads and its
 * backend is known, its stop), the CPU samples of the processes a row
 * reports on, and the relay's statements as pg_stat_statements counts
 * them.  run_outbox.c keeps the measurements (the latency writers, the
 * throughput runs, the rows) and the set-up of the servers.
 *
 * Needs libpq: include it (after config.h) only where HAVE_LIBPQ is
 * defined.  Without libpq run_outbox.c compiles to a stub that skips and
 * outbox_env.c to nothing.
 */
#ifndef DQ_BENCH_OUTBOX_ENV_H
#define DQ_BENCH_OUTBOX_ENV_H

#include <libpq-fe.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bench/bench.h"
#include "bench/daemon_proc.h"
#include "bench/redis_proc.h"
#include "lib/keys.h"
#include "tests/pg_fixture.h"

/* The outbox run's state: zeroed by the caller, filled by its setup and
 * by oenv_daemon_start. */
struct octx {
    const struct bench_env *env;    /* the bench's options and programs */
    struct redis_proc redis;    /* the private redis-server; its directory
                                   holds delayqd's configuration and logs */
    struct pg_server pg;        /* the private PostgreSQL 15 */
    int pg_up;                  /* pg started: the teardown stops it */
    struct daemon_proc daemon;  /* delayqd with the source; pid 0 when stopped */
    redisContext *rc;           /* the bench's own connection to redis */
    char zset[KEYS_NAME_MAX];   /* the queue's delayed set */
    PGconn *conn;               /* the bench's own: DDL, bulk rows, polls */
    char relay_conninfo[700];   /* the relay's: role "relay", its grants only */
    int pgss;                   /* pg_stat_statements is loaded */
    pid_t own_backend;          /* its backend */
    pid_t relay;                /* the relay child of delayqd */
    pid_t backend;              /* the relay's PostgreSQL backend */
    int starts;                 /* daemons started: each has its own log */
};

/* The CPU (µs) of the processes a run looks at, at one instant (wall_us:
 * when it was taken, or the instant a run sets). */
struct osample {
    int64_t wall_us, relay, backend, pg_all, own_backend, daemon, redis;
};

/* Their time (planning and execution, ms) since oenv_stmt_reset, by kind. */
struct stmt_time {
    double take, del, commit, other;
    double takes;               /* calls of the take */
};

/* ---- PostgreSQL ------------------------------------------------------------ */

/* Run `sql` on c; its result (PQclear it) when it succeeded, else NULL
 * with the message in err. */
PGresult *oenv_sql_run(PGconn *c, const char *sql, char *err, size_t errlen);

/* oenv_sql_run for a statement whose result is not wanted: 0, or -1 (err). */
int oenv_sql_ok(PGconn *c, const char *sql, char *err, size_t errlen);

/* The first column of the first row as a number; -1 with err. */
int oenv_sql_long(PGconn *c, const char *sql, long long *out, char *err, size_t errlen);

/* A connection that keeps the server's notices to itself (the DDL's
 * "already exists, skipping"). */
PGconn *oenv_pg_connect(const char *conninfo, char *err, size_t errlen);

/* The outbox's tables and functions, as `delayq outbox sql` prints them. */
int oenv_load_ddl(struct octx *x, char *err, size_t errlen);

/* ---- the daemon -------------------------------------------------------------- */

/* Stop delayqd (SIGTERM, SIGKILL after 15 s) and forget its relay's pid;
 * nothing when it is not running.  The relay's backend stays in
 * x->backend: the next start must see a new one. */
void oenv_daemon_stop(struct octx *x);

/* Start delayqd with the source at `batch`, its log DIR/delayqd-N-bB.log,
 * and wait until it is ready.  0, or -1 with the reason. */
int oenv_daemon_start(struct octx *x, int batch, char *err, size_t errlen);

/* ---- CPU ------------------------------------------------------------------------ */

/* The CPU of every process a row reports on; -1 for one that is gone. */
void oenv_sample(const struct octx *x, struct osample *s);

/* The relay and its backend must be the ones of the start: a restart
 * would make their CPU meaningless.  0, or -1 with the reason. */
int oenv_same_relay(const struct osample *a, const struct osample *b, char *err,
                    size_t errlen);

/* ---- the relay's statements (pg_stat_statements) ------------------------------- */

/* Zero pg_stat_statements' counters, so that oenv_stmt_read counts from
 * here; nothing without it.  0, or -1 (err). */
int oenv_stmt_reset(struct octx *x, char *err, size_t errlen);

/* The relay role's statements since oenv_stmt_reset; all NAN without
 * pg_stat_statements.  0, or -1 (err). */
int oenv_stmt_read(struct octx *x, struct stmt_time *t, char *err, size_t errlen);

/* "stmt_us/row=T (take a delete b commit c other d) takes/row=N" into
 * out. */
void oenv_stmt_note(const struct stmt_time *t, double rows, char *out, size_t len);

#endif
