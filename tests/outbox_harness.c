/*
 * What the outbox's tests share (tests/outbox_harness.h): one PostgreSQL
 * 15 per test program, a database per test, the roles and grants of
 * docs/outbox.md, the daemon's configuration with a source.
 */
#include "outbox_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "outbox/outbox_sql.h"
#include "testutil.h"

struct harness H;
/* One server for the whole run (started before the tests fork, in the
 * runner), a database of its own for each test: a server start is most
 * of a short test's time. */
struct pg_server PG;
static char PG_DIR[128];
/* The roles docs/outbox.md tells users to make, with only its grants:
 * the relay's and the service's. */
char RELAY_CONNINFO[700], SHOP_CONNINFO[700];

void ob_pg_up(void)
{
    char err[300] = "";
    if (tu_make_temp_dir("dqoutbox", PG_DIR, sizeof PG_DIR, err, sizeof err) < 0
        || pg_start(&PG, PG_DIR) != 0) {
        fprintf(stderr, "check_outbox: PostgreSQL did not start: %s%s\n", err, PG.why);
        exit(1);
    }
    if (pg_exec(&PG, "CREATE ROLE relay LOGIN; CREATE ROLE shop LOGIN") != 0) {
        fprintf(stderr, "check_outbox: %s\n", PG.why);
        exit(1);
    }
}

void ob_pg_down(void)
{
    pg_stop(&PG);
    tu_remove_tree(PG_DIR);
}

/* This test's own database (the fixture's calls and the conninfos then
 * name it), with the outbox, an orders table and the roles' grants. */
static void make_database(void)
{
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE DATABASE t%d", (int)getpid());
    ck_assert_msg(pg_exec(&PG, sql) == 0, "%s", PG.why);
    char *db = strstr(PG.conninfo, "dbname=postgres");
    ck_assert(db != NULL);
    char rest[sizeof PG.conninfo];
    snprintf(rest, sizeof rest, "%s", db + strlen("dbname=postgres"));
    snprintf(db, sizeof PG.conninfo - (size_t)(db - PG.conninfo), "dbname=t%d%s",
             (int)getpid(), rest);
}

void ob_setup(void)
{
    h_setup(&H);
    make_database();
    char *sql = outbox_sql_string(OUTBOX_DEFAULT_SCHEMA, OUTBOX_DEFAULT_TABLE);
    ck_assert(sql != NULL);
    ck_assert_msg(pg_exec(&PG, sql) == 0, "the outbox's SQL: %s", PG.why);
    free(sql);
    ck_assert_msg(pg_exec(&PG, "CREATE TABLE orders (id int PRIMARY KEY, paid bool "
                               "NOT NULL DEFAULT false)") == 0, "%s", PG.why);
    ck_assert_msg(pg_exec(&PG, "GRANT SELECT, UPDATE, DELETE ON delayq_outbox TO relay; "
                               "GRANT INSERT ON delayq_outbox_dead TO relay; "
                               "GRANT INSERT ON delayq_outbox TO shop; "
                               "GRANT USAGE ON SEQUENCE delayq_outbox_id_seq TO shop; "
                               "GRANT SELECT, INSERT, UPDATE ON orders TO shop") == 0,
                  "%s", PG.why);
    snprintf(RELAY_CONNINFO, sizeof RELAY_CONNINFO, "%s user=relay", PG.conninfo);
    snprintf(SHOP_CONNINFO, sizeof SHOP_CONNINFO, "%s user=shop", PG.conninfo);
}

void ob_teardown(void)
{
    h_teardown(&H);
}

/* The sources entry for the fixture's database, with `more` settings. */
const char *ob_source_conf(char *buf, size_t len, const char *more)
{
    snprintf(buf, len, "sources = ( { type = \"postgres\"; conninfo = \"%s\"; "
             "poll_interval = \"500ms\"; %s } );\n", RELAY_CONNINFO, more ? more : "");
    return buf;
}

void ob_write_conf(int workers, const char *more, const char *extra)
{
    struct h_conf hc;
    h_conf_defaults(&hc);
    hc.workers = workers;
    hc.batch = 64;
    char src[1024], all[2048];
    ob_source_conf(src, sizeof src, more);
    snprintf(all, sizeof all, "%s%s", src, extra ? extra : "");
    hc.extra = all;
    h_write_conf(&H, &hc);
}

/* A connection as the service's role. */
PGconn *ob_connect(void)
{
    PGconn *c = PQconnectdb(SHOP_CONNINFO);
    ck_assert_msg(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
    return c;
}

/* Run `sql` on `c`; the test fails on an error. */
void ob_run(PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql,
                  PQerrorMessage(c));
    PQclear(r);
}

long long ob_count_rows(const char *table)
{
    char sql[128], out[32];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
    ck_assert_msg(pg_query_value(&PG, sql, out, sizeof out) == 0, "%s", PG.why);
    return atoll(out);
}

int ob_outbox_empty(void *arg)
{
    (void)arg;
    return ob_count_rows("delayq_outbox") == 0;
}
