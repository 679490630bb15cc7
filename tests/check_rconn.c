/*
 * The daemon's asynchronous Redis connection (src/redis/rconn.c), against
 * a real redis-server: a request's deadline counts from when it is sent,
 * and a reply that came while the loop was busy (a worker runs its
 * handlers inside one callback) is not late.
 */
#include <check.h>
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "fixture.h"
#include "redis/rconn.h"

static struct redis_fixture FX;

struct probe {
    struct event_base *base;
    struct rconn *rc;
    int busy_ms;            /* how long the loop is kept busy after sending */
    int before_ms;          /* how long it is busy before sending */
    pid_t stop;             /* a server to SIGSTOP before sending, or 0 */
    int replies, nulls;
    uint64_t reconnects;
};

static void on_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct probe *p = arg;
    if (reply && reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "PONG") == 0)
        p->replies++;
    else
        p->nulls++;
    event_base_loopexit(p->base, NULL);
}

/* Connected: send a PING and keep the loop busy (as a handler does)
 * before, after, or around it. */
static void on_up(struct rconn *rc, void *arg)
{
    struct probe *p = arg;
    if (p->replies + p->nulls > 0)
        return;
    tu_sleep_ms(p->before_ms);
    if (p->stop)
        ck_assert_int_eq(kill(p->stop, SIGSTOP), 0);
    struct cmd c;
    cmd_init(&c);
    cmd_push_str(&c, "PING");
    ck_assert_int_eq(rconn_send(rc, &c, -1, on_reply, p), 0);
    cmd_free(&c);
    tu_sleep_ms(p->busy_ms);
}

/* Run one PING with a command timeout of 200 ms. */
static void run_probe(struct probe *p)
{
    dq_options opt;
    fixture_options(&FX, &opt);
    opt.command_timeout_ms = 200;
    p->base = event_base_new();
    ck_assert(p->base != NULL);
    struct rconn_events ev = { on_up, NULL, p, NULL };
    p->rc = rconn_new(p->base, &opt, "test", &ev);
    ck_assert(p->rc != NULL);
    rconn_count_reconnects(p->rc, &p->reconnects);
    rconn_start(p->rc);
    struct timeval cap = { 5, 0 };
    event_base_loopexit(p->base, &cap);
    event_base_dispatch(p->base);
    rconn_free(p->rc);
    event_base_free(p->base);
}

/* Busy 600 ms (three command timeouts) before sending: the deadline starts
 * at the send, not at the loop's last wake-up. */
START_TEST(deadline_starts_at_the_send)
{
    struct probe p = { .before_ms = 600 };
    run_probe(&p);
    ck_assert_int_eq(p.replies, 1);
    ck_assert_int_eq(p.nulls, 0);
    ck_assert_int_eq(p.reconnects, 0);
}
END_TEST

/* Busy 600 ms after sending: the reply came long before the loop could
 * read it; it is handed over, not counted late. */
START_TEST(reply_read_late_is_not_late)
{
    struct probe p = { .busy_ms = 600 };
    run_probe(&p);
    ck_assert_int_eq(p.replies, 1);
    ck_assert_int_eq(p.nulls, 0);
    ck_assert_int_eq(p.reconnects, 0);
}
END_TEST

/* A server that does not answer (SIGSTOP) still misses the deadline, busy
 * loop or not: the request fails and the connection is dropped. */
START_TEST(silent_server_misses_the_deadline)
{
    struct probe p = { .busy_ms = 600, .stop = FX.pid };
    run_probe(&p);
    ck_assert_int_eq(kill(FX.pid, SIGCONT), 0);
    ck_assert_int_eq(p.replies, 0);
    ck_assert_int_eq(p.nulls, 1);
}
END_TEST

static void up(void)
{
    fixture_redis_start(&FX);
}

static void down(void)
{
    fixture_redis_stop(&FX);
}

int main(void)
{
    Suite *s = suite_create("rconn");
    TCase *tc = fixture_tcase(s, "deadline", 20, up, down, NULL, NULL);
    tcase_add_test(tc, deadline_starts_at_the_send);
    tcase_add_test(tc, reply_read_late_is_not_late);
    tcase_add_test(tc, silent_server_misses_the_deadline);
    return fixture_run_suite(s);
}
