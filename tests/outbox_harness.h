/*
 * What the outbox's tests (tests/check_outbox.c, tests/check_outbox_faults.c)
 * share: one real PostgreSQL 15 per test program, started in the runner
 * before the tests fork (ob_pg_up, ob_pg_down: Check's unchecked fixture),
 * and for each test (ob_setup, ob_teardown: its checked fixture) a Redis,
 * a database of its own with the outbox (as `delayq outbox sql` makes it),
 * an orders table, and the grants docs/outbox.md gives the relay's role
 * (relay) and the service's (shop).  Only built with libpq.
 */
#ifndef DQ_TEST_OUTBOX_HARNESS_H
#define DQ_TEST_OUTBOX_HARNESS_H

#include <libpq-fe.h>
#include <stddef.h>

#include "daemon_harness.h"
#include "pg_fixture.h"

extern struct harness H;        /* this test's Redis and daemon */
extern struct pg_server PG;     /* the program's server; its conninfo names
                                   this test's database */
/* The relay's and the service's connection strings (a test may point the
 * relay's elsewhere). */
extern char RELAY_CONNINFO[700], SHOP_CONNINFO[700];

/* The unchecked fixture: start the server and make the roles; stop it. */
void ob_pg_up(void);
void ob_pg_down(void);
/* The checked fixture. */
void ob_setup(void);
void ob_teardown(void);

/* The sources entry for this test's database (as the relay's role), with
 * `more` settings, in `buf`. */
const char *ob_source_conf(char *buf, size_t len, const char *more);
/* Write H.conf: `workers` workers, batch 64, the source with `more`, and
 * `extra` text after it. */
void ob_write_conf(int workers, const char *more, const char *extra);

/* A connection as the service's role; run `sql` on it, the test failing
 * on an error. */
PGconn *ob_connect(void);
void ob_run(PGconn *c, const char *sql);
/* Rows of `table` in this test's database. */
long long ob_count_rows(const char *table);
/* h_wait condition: the outbox table is empty. */
int ob_outbox_empty(void *arg);

#endif
