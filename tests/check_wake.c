/*
 * The wake channel's messages and the race between them and replies
 * (src/daemon/worker/wake.c): what a worker believes of its queue's pause.
 */
#include <check.h>
#include <string.h>

#include "daemon/worker/wake.h"
#include "fixture.h"

static enum wake_kind parse(const char *msg, int64_t *ms)
{
    *ms = -7;
    return wake_parse(msg, strlen(msg), ms);
}

START_TEST(messages_are_told_apart)
{
    int64_t ms;
    ck_assert_int_eq(parse("1795471640482", &ms), WAKE_DUE);
    ck_assert_int_eq(ms, 1795471640482LL);
    ck_assert_int_eq(parse("pause 1795471640482", &ms), WAKE_PAUSE);
    ck_assert_int_eq(ms, 1795471640482LL);
    ck_assert_int_eq(parse("resume 12", &ms), WAKE_RESUME);
    ck_assert_int_eq(ms, 12);
    /* Anything else is ignored, never read as a due time of 0. */
    static const char *const bad[] = { "", "pause", "pause ", "pause x", "resume 1 2",
                                       "paused 1", "12abc", "hello", "99999999999999999999999" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(parse(bad[i], &ms) == WAKE_UNKNOWN, "'%s' was taken", bad[i]);
    ck_assert_int_eq(wake_parse("pause 5xyz", 7, &ms), WAKE_PAUSE);  /* len bounds it */
    ck_assert_int_eq(ms, 5);
}
END_TEST

/* A reply is taken unless a message heard since may be newer: its request
 * left before the message came and its script ran no later than it. */
START_TEST(a_reply_older_than_a_message_is_not_taken)
{
    struct pause_view v = { 0 };
    ck_assert(pause_view_observe(&v, true, 1000, 10));      /* nothing heard: taken */
    ck_assert(v.paused);
    pause_view_hear(&v, false, 2000, 500);                  /* resume at 2000, heard at 500 */
    ck_assert(!v.paused);
    /* A claim sent before the message, run before the resume: says paused. */
    ck_assert(!pause_view_observe(&v, true, 1999, 400));
    ck_assert(!pause_view_observe(&v, true, 2000, 500));    /* same ms: the message wins */
    ck_assert(!v.paused);
    /* Run after the message's time, or sent after it came: newer. */
    ck_assert(pause_view_observe(&v, true, 2001, 400));
    ck_assert(v.paused);
    ck_assert(pause_view_observe(&v, false, 1500, 501));    /* a clock step back */
    ck_assert(!v.paused);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("wake");
    TCase *tc = fixture_tcase(s, "wake", 10, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, messages_are_told_apart);
    tcase_add_test(tc, a_reply_older_than_a_message_is_not_taken);
    return fixture_run_suite(s);
}
