/*
 * The tests' Check layer over testutil.h: a real redis-server for the
 * tests, started on a private unix socket in a temporary directory, with
 * persistence off, and stopped by pid; connections to it; loopback HTTP;
 * test cases with their timeouts and the suite runner every main() ends in.
 * What fails here fails the test (ck_assert) or, at start-up, exits.
 *
 * When no redis-server can be found the test program exits 77, which the
 * automake test driver reports as SKIP; CI installs redis-server, so there
 * it always runs.
 */
#ifndef DQ_TEST_FIXTURE_H
#define DQ_TEST_FIXTURE_H

#include <check.h>
#include <delayq/client.h>
#include <stddef.h>
#include <sys/types.h>

#include "testutil.h"

struct redis_fixture {
    char dir[128];       /* the temporary directory */
    char sock[192];      /* DIR/redis.sock */
    char conf_path[192]; /* scratch file name under DIR, for tests */
    pid_t pid;
};

/* Start a server; on failure print why and exit 1 (77 if absent). */
void fixture_redis_start(struct redis_fixture *f);

/* Stop the server (SIGTERM, then SIGKILL after 5 s) and remove DIR. */
void fixture_redis_stop(struct redis_fixture *f);

/* Restart the server on the same socket (its data is lost: no persistence).
 * A test may call it in Check's forked child; the parent's copy of the
 * struct then still holds the old pid: hand the new one back (through
 * MAP_SHARED memory, say) so that the parent's teardown stops the new
 * server.  (Do not put the struct itself there: spawning writes f->pid in
 * the forked child too.) */
void fixture_redis_restart(struct redis_fixture *f);

/* Delete every key. */
void fixture_redis_flush(const struct redis_fixture *f);

/* A client on the fixture's socket; the test fails if it cannot connect. */
dq_client *fixture_client(const struct redis_fixture *f);

/* A raw hiredis connection to the fixture (5 s timeouts), for what the API
 * does not offer; the test fails if it cannot connect.  redisFree it. */
redisContext *fixture_redis_connect(const struct redis_fixture *f);

/* Options that reach the fixture (its socket), for tests that set more. */
void fixture_options(const struct redis_fixture *f, dq_options *opt);

/* Run a raw command on the fixture (printf-style, as redisCommand) and
 * return its integer reply, or the length of an array reply; -1 on error. */
long long fixture_redis_int(const struct redis_fixture *f, const char *fmt, ...);

/* How many job records queue `queue` (prefix "dq") holds, in its jobs hash
 * and in every bucket of it; -1 on error. */
long long fixture_record_count(const struct redis_fixture *f, const char *queue);

/* A test case added to `s`, with its timeout (always set: a hung test
 * must fail, not stall the suite), the unchecked fixture `up`/`down` (once
 * per case, in the runner: a server) and the checked `setup`/`teardown`
 * (around each test, in its fork); NULL for none. */
TCase *fixture_tcase(Suite *s, const char *name, int timeout, SFun up, SFun down,
                     SFun setup, SFun teardown);

/* Run every case of `s` and return the program's exit status. */
int fixture_run_suite(Suite *s);

/* Path of a built program: $(top_builddir)/NAME, from the environment
 * variable TOP_BUILDDIR the test harness sets (default "."). */
const char *fixture_build_path(const char *name);

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int fixture_free_port(void);

/* Make `f` listen on a TCP port of 127.0.0.1 as well (replication, the
 * sentinels and the cluster need one); returns the port.  A port found
 * free can be taken before Redis binds it (by another test, or as the
 * local port of a connection: both come from the same range); CONFIG SET
 * then fails and leaves the old port, and another is tried. */
int fixture_redis_listen_tcp(const struct redis_fixture *f);

/* GET `path` from 127.0.0.1:port (HTTP/1.0, 10 s at most); the body into
 * `body` (NUL-terminated, cut at len).  Returns the status, -1 when no
 * connection could be made, or 0 when the connection ended without an
 * answer (a listener closed with the connection still in its queue resets
 * it). */
int fixture_http_get(int port, const char *path, char *body, size_t len);

#endif
