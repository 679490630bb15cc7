/*
 * What the check_client* programs share: the server (one per TCase, an
 * unchecked fixture), the test's client `cl` (checked fixture: every test
 * starts from an empty, password-free server), helpers that insist on
 * DQ_OK, and main(), which runs the program's client_suite().
 */
#ifndef DQ_TEST_CLIENT_TEST_H
#define DQ_TEST_CLIENT_TEST_H

#include <check.h>
#include <delayq/client.h>
#include <hiredis/hiredis.h>
#include <stdint.h>
#include <sys/types.h>

#include "fixture.h"

#define Q "jobs"
#define TEST_PASSWORD "s3cret-pw"

extern struct redis_fixture *const fx;
/* The server's pid, in MAP_SHARED memory: a test that restarts the server
 * runs in Check's forked child, and the parent must know the new one. */
extern pid_t *live_pid;
extern dq_client *cl;   /* the test's client, made by setup */

/* The program's test cases (each check_client*.c defines it). */
Suite *client_suite(void);

/* ---- helpers ------------------------------------------------------------ */

int64_t server_now(void);

/* A raw connection to the fixture, for what the API does not offer. */
redisContext *raw_connect(void);

/* Run a raw command (printf-style, as redisCommand: "%s" for an empty
 * argument) and return whether Redis accepted it. */
__attribute__((format(printf, 2, 3)))
int raw_ok(redisContext *rc, const char *fmt, ...);

dq_enqueue_req req_make(const char *id, const char *payload,
                        int64_t delay_ms, int max_attempts);

/* Enqueue on Q and insist on DQ_OK. */
dq_enqueued enq(const char *id, const char *payload, int64_t delay_ms,
                int max_attempts);

/* Claim up to `max` from Q and insist on DQ_OK and exactly `n` jobs. */
void claim_n(int max, int64_t lease_ms, size_t n, dq_claim_result *res);

/* Poll until one job is claimable (within `within_ms`) and claim it. */
void claim_wait(int64_t lease_ms, int within_ms, dq_claim_result *res);

void show(const char *id, dq_job_info *info);

dq_stats stats(void);

void policy_make(dq_retry_policy *p, int64_t base, int64_t cap, double jitter,
                 int default_max);

/* Enqueue `id` due now, claim it and fail it for good. */
void make_dead(const char *id);

/* ---- fixtures ----------------------------------------------------------- */

void server_up(void);

void server_down(void);

void restart_server(void);

/* Undo what any earlier test may have left (a stopped server, a password,
 * an ACL user), empty the server and make the test's client. */
void test_setup(void);

void test_teardown(void);

TCase *tcase(Suite *s, const char *name, int timeout);

#endif
