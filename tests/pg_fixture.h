/*
 * A private, real PostgreSQL 15 server for the tests: a fresh cluster
 * (initdb) in the caller's directory, a postmaster started by fork+exec of
 * `postgres` (not `pg_ctl start`) so that we own its pid, listening on a
 * unix socket only, in a private socket directory under /tmp, and stopped
 * by pid.  Small and fast: fsync, synchronous_commit and full_page_writes
 * off, shared_buffers=16MB, max_connections=50.  The superuser is
 * "delayq", authentication is `trust`, locale C, encoding UTF8, time zone
 * UTC.  The server's (and initdb's) output goes to BASE_DIR/pg.log.
 *
 * Run as root, initdb and postgres (which refuse root) run as "nobody":
 * the data and socket directories are chowned to it.  When nobody cannot
 * reach BASE_DIR (a 0700 test directory, /root), the data directory goes
 * into the socket directory instead (/tmp/dqpg.XXXXXX/pg) and pg_stop
 * removes it; the log stays in BASE_DIR.
 *
 * The server dies with the process that ran pg_start (it gets SIGQUIT,
 * an immediate shutdown, when that process ends), so a test that fails
 * (Check's _exit skips the checked teardown), times out (SIGKILL) or is
 * interrupted leaves no server running.  pg_start in a checked setup
 * (in the test's fork) or in an unchecked one (in the runner) both work.
 *
 * Check forks each test (CK_FORK): a test that restarts a server the
 * runner started (pg_restart, pg_kill + pg_start_again) changes pid only in
 * its own copy of the struct, and that server outlives the test.  That is
 * fine: the stop, kill and restart functions find the postmaster that runs
 * on the data directory from its postmaster.pid file, so the runner's
 * pg_stop stops it.  (If the runner dies without pg_stop, that one server
 * is left running.)
 *
 * Nothing here depends on Check and nothing is global: errors come back as
 * -1 (or 1: skip) with one line in pg->why.
 */
#ifndef DQ_TEST_PG_FIXTURE_H
#define DQ_TEST_PG_FIXTURE_H

#include <stddef.h>
#include <sys/types.h>

/* Where initdb and postgres are; the build may override it. */
#ifndef PG_FIXTURE_BINDIR
#define PG_FIXTURE_BINDIR "/usr/lib/postgresql/15/bin"
#endif

#define PG_FIXTURE_USER "delayq"

struct pg_server {
    char dir[256];        /* the data directory: BASE_DIR/pg, or SOCKDIR/pg
                             when "nobody" cannot reach BASE_DIR (as root) */
    char sockdir[256];    /* the private unix socket directory, /tmp/dqpg.XXXXXX */
    char log[300];        /* BASE_DIR/pg.log: initdb's and the server's output */
    int port;             /* the number in the socket's name (.s.PGSQL.PORT);
                             there is no TCP listener (listen_addresses='') */
    pid_t pid;            /* the postmaster we started (0: none); see above
                             for a server started in a forked test */
    char conninfo[600];   /* "host=SOCKDIR port=PORT dbname=postgres user=USER",
                             for PQconnectdb */
    char user[64];        /* the database superuser: PG_FIXTURE_USER */
    char why[300];        /* one line: why the last call returned 1 or -1 */
    uid_t run_uid;        /* the user and group initdb and postgres run as: */
    gid_t run_gid;        /* "nobody" when we are root, else ourselves */
    pid_t owner;          /* the process that ran pg_start: a server it starts
                             gets SIGQUIT when it dies (PR_SET_PDEATHSIG) */
};

/* Create a cluster in BASE_DIR/pg (BASE_DIR must exist; pg must not), start
 * it, wait (30 s at most) until it accepts connections and fill *pg.
 * Returns 0 when it runs; 1 when this machine cannot run PostgreSQL 15 (not
 * installed, no "nobody" user, initdb failed: the caller skips); -1 on
 * another failure.  On 1 and -1 pg->why says why, nothing is left running
 * and the socket directory is removed (pg_stop is still safe to call). */
int pg_start(struct pg_server *pg, const char *base_dir) __attribute__((warn_unused_result));

/* Stop the server (SIGINT: fast shutdown; SIGKILL to it and its children
 * after 10 s), reap it, and remove the socket directory (with the data
 * directory when it is in there).  Idempotent; leaves pg->why alone.  The
 * data directory in BASE_DIR is left for the caller's harness. */
void pg_stop(struct pg_server *pg);

/* Stop the server as pg_stop does but keep everything for pg_start_again.
 * 0 when it shut down; -1 (pg->why) when it was not running or had to be
 * killed after 10 s. */
int pg_stop_only(struct pg_server *pg) __attribute__((warn_unused_result));

/* pg_stop_only then pg_start_again: the same cluster on the same socket.
 * Clients see their connections closed ("PostgreSQL restarted mid-run"). */
int pg_restart(struct pg_server *pg) __attribute__((warn_unused_result));

/* A crash: SIGKILL the postmaster and every child of it, and wait until
 * they are gone.  pg_start_again then runs crash recovery.  A cluster left
 * killed leaks a few bytes of shared memory (a SysV segment, a file in
 * /dev/shm) until the next start of it: end with pg_start_again + pg_stop. */
void pg_kill(struct pg_server *pg);

/* Start the cluster again, after pg_kill or pg_stop_only (not pg_stop), on
 * the same socket and port, and wait until it accepts connections (30 s).
 * 0, or -1 (pg->why) when it was running already or does not come up. */
int pg_start_again(struct pg_server *pg) __attribute__((warn_unused_result));

/* Run `sql` (one or several statements) on a new connection to database
 * "postgres".  0, or -1 with the server's message in pg->why.  Several
 * statements run in one implicit transaction, so CREATE DATABASE, VACUUM
 * and the like must come alone.  Notices are discarded. */
int pg_exec(struct pg_server *pg, const char *sql) __attribute__((warn_unused_result));

/* Run a query and copy the first column of its first row, as text, into
 * out (NUL-terminated, cut at outlen; "" for NULL).  0, or -1 (pg->why),
 * also when it returns no row. */
int pg_query_value(struct pg_server *pg, const char *sql, char *out, size_t outlen)
    __attribute__((warn_unused_result));

#endif
