/* The cluster reply policy both connection stacks follow (the library's
 * blocking client, the daemon's async connections): every kind of reply,
 * asked or not, at every point of the redirection count and the budget. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "fixture.h"
#include "redis/cluster_policy.h"

/* A reply of each kind the policy tells apart, and "no reply". */
enum reply { R_ANSWER, R_OTHER_ERROR, R_MOVED, R_ASK, R_TRYAGAIN, R_CLUSTERDOWN,
             R_READONLY, R_MASTERDOWN, R_LOADING, R_LOST_SENT, R_LOST_UNSENT, R_COUNT };

static const char *const error_text[R_COUNT] = {
    [R_ANSWER] = NULL,
    [R_OTHER_ERROR] = "ERR wrong number of arguments",
    [R_MOVED] = "MOVED 3999 127.0.0.1:6381",
    [R_ASK] = "ASK 3999 10.0.0.7:7002",
    [R_TRYAGAIN] = "TRYAGAIN Multiple keys request during rehashing of slot",
    [R_CLUSTERDOWN] = "CLUSTERDOWN The cluster is down",
    [R_READONLY] = "READONLY You can't write against a read only replica.",
    [R_MASTERDOWN] = "MASTERDOWN Link with MASTER is down",
    [R_LOADING] = "LOADING Redis is loading the dataset in memory",
};

static struct cluster_facts facts(enum reply r, int asked, int redirects, int64_t elapsed,
                                  int64_t budget)
{
    struct cluster_facts f = { .error = error_text[r], .asked = asked,
                               .redirects = redirects, .pause_ms = 0,
                               .elapsed_ms = elapsed, .budget_ms = budget, .rnd = 0 };
    f.no_reply = r == R_LOST_SENT || r == R_LOST_UNSENT;
    f.sent = r == R_LOST_SENT;
    return f;
}

/* What the policy must decide, written out apart from its code. */
static enum cluster_verdict expected(enum reply r, int asked, int redirects, int budget_left)
{
    switch (r) {
    case R_ANSWER:
    case R_OTHER_ERROR:
        return CLUSTER_ANSWER;
    case R_MOVED:
        return redirects >= CLUSTER_REDIRECTS_MAX ? CLUSTER_GIVE_UP : CLUSTER_RESEND_MOVED;
    case R_ASK:
        if (redirects >= CLUSTER_REDIRECTS_MAX)
            return CLUSTER_GIVE_UP;
        return asked ? CLUSTER_ANSWER : CLUSTER_RESEND_ASK;
    case R_TRYAGAIN:
    case R_CLUSTERDOWN:
        return budget_left ? CLUSTER_BACK_OFF : CLUSTER_GIVE_UP;
    case R_READONLY:
    case R_MASTERDOWN:
    case R_LOADING:
    case R_LOST_UNSENT:
        return budget_left ? CLUSTER_REFRESH : CLUSTER_GIVE_UP;
    case R_LOST_SENT:
    default:
        return CLUSTER_GIVE_UP;
    }
}

/* Every reply x asked x redirection count x budget: the verdict, the map
 * refresh, the address followed, the pause inside what is left, and a
 * reason when it gives up. */
START_TEST(every_reply_gets_its_verdict)
{
    static const int redirect_counts[] = { 0, 1, CLUSTER_REDIRECTS_MAX - 1,
                                           CLUSTER_REDIRECTS_MAX, CLUSTER_REDIRECTS_MAX + 3 };
    static const int64_t elapsed[] = { 0, 999, 4950, 5000, 7000 };
    const int64_t budget = 5000;
    int cases = 0;
    for (int r = 0; r < R_COUNT; r++)
        for (int asked = 0; asked <= 1; asked++)
            for (size_t k = 0; k < sizeof redirect_counts / sizeof *redirect_counts; k++)
                for (size_t e = 0; e < sizeof elapsed / sizeof *elapsed; e++) {
                    int red = redirect_counts[k];
                    struct cluster_facts f = facts(r, asked, red, elapsed[e], budget);
                    struct cluster_decision d;
                    cluster_policy_decide(&f, &d);
                    int left = elapsed[e] < budget;
                    enum cluster_verdict want = expected(r, asked, red, left);
                    ck_assert_msg(d.verdict == want, "reply %d asked %d redirects %d elapsed "
                                  "%lld: verdict %d, want %d", r, asked, red,
                                  (long long)elapsed[e], d.verdict, want);
                    int refresh = r == R_MOVED || r == R_READONLY || r == R_MASTERDOWN
                                  || r == R_LOADING || r == R_LOST_SENT || r == R_LOST_UNSENT;
                    if (d.verdict == CLUSTER_GIVE_UP && (r == R_MOVED || r == R_ASK))
                        refresh = 0;
                    ck_assert_int_eq(d.refresh_map, refresh);
                    if (d.verdict == CLUSTER_BACK_OFF || d.verdict == CLUSTER_REFRESH) {
                        ck_assert_int_gt(d.delay_ms, 0);
                        ck_assert_int_le(d.delay_ms, budget - elapsed[e]);
                        ck_assert_int_eq(d.redirects, 0);
                    }
                    if (d.verdict == CLUSTER_RESEND_MOVED || d.verdict == CLUSTER_RESEND_ASK) {
                        ck_assert_int_eq(d.redirects, red + 1);
                        ck_assert_uint_eq(d.slot, 3999);
                        ck_assert_str_eq(d.host, r == R_MOVED ? "127.0.0.1" : "10.0.0.7");
                        ck_assert_int_eq(d.port, r == R_MOVED ? 6381 : 7002);
                    }
                    if (d.verdict == CLUSTER_GIVE_UP)
                        ck_assert_msg(d.why[0] && !strchr(d.why, '\n'), "why: %s", d.why);
                    cases++;
                }
    ck_assert_int_eq(cases, R_COUNT * 2 * 5 * 5);
}
END_TEST

/* A give-up says whether the cluster is out (the caller reports a
 * connection failure) or answered with an error. */
START_TEST(a_give_up_says_outage_or_error)
{
    struct cluster_decision d;
    struct cluster_facts f = facts(R_TRYAGAIN, 0, 0, 6000, 5000);
    cluster_policy_decide(&f, &d);
    ck_assert_int_eq(d.outage, 0);
    ck_assert_msg(strstr(d.why, "TRYAGAIN") && strstr(d.why, "still after 6000 ms"), "%s",
                  d.why);
    f = facts(R_CLUSTERDOWN, 0, 0, 6000, 5000);
    cluster_policy_decide(&f, &d);
    ck_assert_int_eq(d.outage, 1);
    f = facts(R_LOST_SENT, 0, 0, 0, 5000);
    cluster_policy_decide(&f, &d);
    ck_assert_int_eq(d.outage, 1);
    ck_assert_msg(strstr(d.why, "lost"), "%s", d.why);
    f = facts(R_MOVED, 0, CLUSTER_REDIRECTS_MAX, 0, 5000);
    cluster_policy_decide(&f, &d);
    ck_assert_int_eq(d.outage, 0);
    ck_assert_msg(strstr(d.why, "still redirected") && strstr(d.why, "MOVED 3999"), "%s",
                  d.why);
}
END_TEST

/* A lost master's command may have run: never sent again, whatever the
 * budget. */
START_TEST(a_command_lost_after_sending_is_never_resent)
{
    for (int64_t e = 0; e < 10000; e += 250) {
        struct cluster_facts f = facts(R_LOST_SENT, 0, 0, e, 5000);
        struct cluster_decision d;
        cluster_policy_decide(&f, &d);
        ck_assert_int_eq(d.verdict, CLUSTER_GIVE_UP);
    }
}
END_TEST

/* The pauses: 100 ms first, doubled up to 1 s, jittered by at most a
 * quarter either way, the last cut to the budget. */
START_TEST(pauses_double_up_to_a_second_within_the_budget)
{
    int step = 0, total = 0, n = 0;
    const int budget = 5000;
    for (;;) {
        struct cluster_facts f = facts(R_CLUSTERDOWN, 0, 0, total, budget);
        f.pause_ms = step;
        f.rnd = (unsigned long)n * 7919u;
        struct cluster_decision d;
        cluster_policy_decide(&f, &d);
        if (d.verdict == CLUSTER_GIVE_UP)
            break;
        ck_assert_int_eq(d.verdict, CLUSTER_BACK_OFF);
        int nominal = step ? step : CLUSTER_PAUSE_MIN_MS;
        if (nominal > CLUSTER_PAUSE_MAX_MS)
            nominal = CLUSTER_PAUSE_MAX_MS;
        int left = budget - total;
        int lo = nominal - nominal / 4 < left ? nominal - nominal / 4 : left;
        ck_assert_int_ge(d.delay_ms, lo);
        ck_assert_int_le(d.delay_ms, nominal + nominal / 4);
        ck_assert_int_le(d.delay_ms, left);
        ck_assert_int_eq(d.pause_ms, nominal * 2 > CLUSTER_PAUSE_MAX_MS ? CLUSTER_PAUSE_MAX_MS
                                                                         : nominal * 2);
        step = d.pause_ms;
        total += d.delay_ms;
        ck_assert_int_lt(++n, 100);
    }
    ck_assert_int_eq(total, budget);    /* the last pause ends on the deadline */
    ck_assert_int_ge(n, 6);             /* 100+200+400+800+1000+...: not one long sleep */
}
END_TEST

/* The error texts: what counts as which, and malformed redirections are
 * the caller's errors, never followed. */
START_TEST(error_texts_are_classified)
{
    ck_assert_int_eq(cluster_error_kind(NULL), CLUSTER_ERR_NONE);
    ck_assert_int_eq(cluster_error_kind("MOVED 1 h:2"), CLUSTER_ERR_MOVED);
    ck_assert_int_eq(cluster_error_kind("ASK 16383 [::1]:7000"), CLUSTER_ERR_ASK);
    ck_assert_int_eq(cluster_error_kind("MOVED 99999 h:1"), CLUSTER_ERR_NONE);
    ck_assert_int_eq(cluster_error_kind("MOVED 1 nohost"), CLUSTER_ERR_NONE);
    ck_assert_int_eq(cluster_error_kind("ASK"), CLUSTER_ERR_NONE);
    ck_assert_int_eq(cluster_error_kind("TRYAGAIN x"), CLUSTER_ERR_TRYAGAIN);
    ck_assert_int_eq(cluster_error_kind("CLUSTERDOWN Hash slot not served"),
                     CLUSTER_ERR_CLUSTERDOWN);
    ck_assert_int_eq(cluster_error_kind("READONLY x"), CLUSTER_ERR_DEMOTED);
    ck_assert_int_eq(cluster_error_kind("MASTERDOWN x"), CLUSTER_ERR_DEMOTED);
    ck_assert_int_eq(cluster_error_kind("LOADING x"), CLUSTER_ERR_DEMOTED);
    ck_assert_int_eq(cluster_error_kind("ERR unknown command"), CLUSTER_ERR_NONE);
    ck_assert_int_eq(cluster_error_kind("NOSCRIPT No matching script"), CLUSTER_ERR_NONE);
    ck_assert_int_eq(cluster_error_kind(""), CLUSTER_ERR_NONE);

    struct cluster_facts f = facts(R_ANSWER, 0, 0, 0, 5000);
    f.error = "MOVED 1 nohost";
    struct cluster_decision d;
    cluster_policy_decide(&f, &d);
    ck_assert_int_eq(d.verdict, CLUSTER_ANSWER);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster_policy");
    TCase *tc = fixture_tcase(s, "policy", 10, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, every_reply_gets_its_verdict);
    tcase_add_test(tc, a_give_up_says_outage_or_error);
    tcase_add_test(tc, a_command_lost_after_sending_is_never_resent);
    tcase_add_test(tc, pauses_double_up_to_a_second_within_the_budget);
    tcase_add_test(tc, error_texts_are_classified);
    return fixture_run_suite(s);
}
