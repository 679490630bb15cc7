/*
 * The fixtures, helpers and main() of the check_client* programs
 * (client_test.h).
 */
#include <check.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client_test.h"

static struct redis_fixture fixture;
struct redis_fixture *const fx = &fixture;
pid_t *live_pid;
dq_client *cl;

/* ---- helpers ------------------------------------------------------------ */

int64_t server_now(void)
{
    int64_t now = 0;
    ck_assert_int_eq(dq_server_time(cl, &now), DQ_OK);
    return now;
}

redisContext *raw_connect(void)
{
    return fixture_redis_connect(fx);
}

__attribute__((format(printf, 2, 3)))
int raw_ok(redisContext *rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(rc, fmt, ap);
    va_end(ap);
    int ok = r && r->type != REDIS_REPLY_ERROR;
    if (r)
        freeReplyObject(r);
    return ok;
}

dq_enqueue_req req_make(const char *id, const char *payload,
                        int64_t delay_ms, int max_attempts)
{
    dq_enqueue_req r = {
        .queue = Q, .type = "email", .id = id, .payload = payload,
        .payload_len = payload ? strlen(payload) : 0, .delay_ms = delay_ms,
        .max_attempts = max_attempts,
    };
    return r;
}

dq_enqueued enq(const char *id, const char *payload, int64_t delay_ms,
                int max_attempts)
{
    dq_enqueue_req r = req_make(id, payload, delay_ms, max_attempts);
    dq_enqueued out;
    memset(&out, 0, sizeof out);
    dq_status st = dq_enqueue(cl, &r, &out);
    ck_assert_msg(st == DQ_OK, "enqueue %s: %s: %s", id ? id : "(generated)",
                  dq_status_str(st), dq_errmsg(cl));
    return out;
}

void claim_n(int max, int64_t lease_ms, size_t n, dq_claim_result *res)
{
    dq_status st = dq_claim(cl, Q, max, lease_ms, res);
    ck_assert_msg(st == DQ_OK, "claim: %s", dq_errmsg(cl));
    ck_assert_uint_eq(res->n, n);
}

void claim_wait(int64_t lease_ms, int within_ms, dq_claim_result *res)
{
    int64_t until = tu_mono_ms() + within_ms;
    for (;;) {
        ck_assert_int_eq(dq_claim(cl, Q, 1, lease_ms, res), DQ_OK);
        if (res->n == 1)
            return;
        dq_claim_result_free(res);
        ck_assert_msg(tu_mono_ms() < until, "no job became due within %d ms", within_ms);
        tu_sleep_ms(5);
    }
}

void show(const char *id, dq_job_info *info)
{
    dq_status st = dq_show(cl, Q, id, info);
    ck_assert_msg(st == DQ_OK, "show %s: %s", id, dq_errmsg(cl));
}

dq_stats stats(void)
{
    dq_stats s;
    ck_assert_int_eq(dq_stats_get(cl, Q, &s), DQ_OK);
    return s;
}

void policy_make(dq_retry_policy *p, int64_t base, int64_t cap, double jitter,
                 int default_max)
{
    dq_retry_policy_init(p);
    p->base_ms = base;
    p->cap_ms = cap;
    p->jitter = jitter;
    p->default_max_attempts = default_max;
}

void make_dead(const char *id)
{
    enq(id, "x", 0, 0);
    dq_claim_result res;
    claim_n(1, 30000, 1, &res);
    ck_assert_str_eq(res.jobs[0].id, id);
    ck_assert_int_eq(dq_fail(cl, Q, id, res.jobs[0].fence, "broken", DQ_FAIL_DEAD,
                             -1, NULL, NULL), DQ_OK);
    dq_claim_result_free(&res);
}

/* ---- fixtures ----------------------------------------------------------- */

void server_up(void)
{
    fixture_redis_start(fx);
    *live_pid = fx->pid;
}

void server_down(void)
{
    fx->pid = *live_pid;
    if (fx->pid > 0)
        kill(fx->pid, SIGCONT);
    fixture_redis_stop(fx);
}

void restart_server(void)
{
    fixture_redis_restart(fx);
    *live_pid = fx->pid;
}

void test_setup(void)
{
    fx->pid = *live_pid;
    kill(fx->pid, SIGCONT);
    redisContext *rc = raw_connect();
    raw_ok(rc, "AUTH " TEST_PASSWORD);
    ck_assert(raw_ok(rc, "CONFIG SET requirepass %s", ""));
    raw_ok(rc, "ACL DELUSER alice");
    ck_assert(raw_ok(rc, "FLUSHALL"));
    redisFree(rc);
    cl = fixture_client(fx);
}

void test_teardown(void)
{
    dq_close(cl);
    cl = NULL;
}

TCase *tcase(Suite *s, const char *name, int timeout)
{
    return fixture_tcase(s, name, timeout, server_up, server_down, test_setup,
                         test_teardown);
}

/* ---- main --------------------------------------------------------------- */

int main(void)
{
    /* SIGPIPE stays at its default on purpose: a write to a connection
     * Redis closed (the restart test) must fail in the library, not kill
     * the program that uses it. */
    signal(SIGPIPE, SIG_DFL);
    live_pid = mmap(NULL, sizeof *live_pid, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (live_pid == MAP_FAILED) {
        perror("mmap");
        return EXIT_FAILURE;
    }
    int status = fixture_run_suite(client_suite());
    munmap(live_pid, sizeof *live_pid);
    return status;
}
