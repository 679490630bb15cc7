/*
 * The Redis Cluster fixture (tests/cluster_fixture.c) the cluster tests
 * stand on: three masters with a replica each on loopback, the slots
 * spread over the masters, slots moved with their keys (also in the
 * background), a killed master's replica promoted, a cluster that
 * requires a password, and one that speaks only TLS (certificates from
 * tests/tls-certs.sh; skipped, saying so, without openssl).  Each test starts its own cluster, in Check's
 * forked child, and stops it by pid.
 */
#include <check.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "fixture.h"

#define OPENSSL "/usr/bin/openssl"

static struct cluster_fx C;

static void start(const struct cluster_fx_opts *o)
{
    char err[400];
    ck_assert_msg(cluster_fx_start(&C, 3, 1, o, err, sizeof err) == 0, "%s", err);
}

static void setup(void)
{
    start(NULL);
}

static void teardown(void)
{
    cluster_fx_stop(&C);
}

/* The slot of `key`, as the cluster computes it. */
static int slot_of(const char *key)
{
    long long s = cluster_fx_int(&C, 0, "CLUSTER KEYSLOT %s", key);
    ck_assert_int_ge(s, 0);
    return (int)s;
}

/* SET `key` on the master that serves it; returns that master. */
static int set_on_owner(const char *key)
{
    int m = cluster_fx_master_of_slot(&C, slot_of(key));
    ck_assert_int_ge(m, 0);
    ck_assert_int_eq(cluster_fx_int(&C, m, "SET %s v", key), 0);
    return m;
}

START_TEST(slots_are_spread_over_the_masters)
{
    ck_assert_int_eq(C.nnodes, 6);
    ck_assert_int_eq(cluster_fx_master_of_slot(&C, 0), 0);
    ck_assert_int_eq(cluster_fx_master_of_slot(&C, 8000), 1);
    ck_assert_int_eq(cluster_fx_master_of_slot(&C, 16383), 2);
    for (int i = 0; i < C.nnodes; i++)
        ck_assert_ptr_nonnull(C.seeds[i]);
    ck_assert_ptr_null(C.seeds[C.nnodes]);
    /* a key lives on its slot's master only; another master refuses it */
    int m = set_on_owner("{a}k");
    ck_assert_int_eq(cluster_fx_keys_on(&C, m, "{a}*"), 1);
    ck_assert_int_eq(cluster_fx_keys_on(&C, (m + 1) % 3, NULL), 0);
    redisReply *r = cluster_fx_cmd(&C, (m + 1) % 3, "GET {a}k");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    ck_assert_msg(strncmp(r->str, "MOVED ", 6) == 0, "%s", r->str);
    freeReplyObject(r);
}
END_TEST

START_TEST(a_moved_slot_takes_its_keys)
{
    char err[400];
    for (int i = 0; i < 250; i++) {
        char k[32];
        snprintf(k, sizeof k, "{b}%d", i);
        set_on_owner(k);
    }
    int slot = slot_of("{b}");
    int from = cluster_fx_master_of_slot(&C, slot), to = (from + 1) % 3;
    ck_assert_int_eq(cluster_fx_move_slot(&C, slot, to, err, sizeof err), 0);
    ck_assert_int_eq(cluster_fx_master_of_slot(&C, slot), to);
    ck_assert_int_eq(cluster_fx_keys_on(&C, to, "{b}*"), 250);
    ck_assert_int_eq(cluster_fx_keys_on(&C, from, "{b}*"), 0);
    ck_assert_int_eq(cluster_fx_wait_ok(&C, 10000), 0);

    /* in the background, while the caller goes on */
    int slots[3] = { slot, slot_of("{c}"), slot_of("{d}") };
    set_on_owner("{c}x");
    ck_assert_int_eq(cluster_fx_reshard_start(&C, slots, 3, from, 20, err, sizeof err), 0);
    ck_assert_int_eq(cluster_fx_reshard_wait(&C, err, sizeof err), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(cluster_fx_master_of_slot(&C, slots[i]), from);
    ck_assert_int_eq(cluster_fx_keys_on(&C, from, "{b}*"), 250);
    ck_assert_int_eq(cluster_fx_keys_on(&C, from, "{c}*"), 1);
}
END_TEST

START_TEST(a_killed_master_is_replaced_by_its_replica)
{
    int m = set_on_owner("{e}k");
    ck_assert_int_eq(cluster_fx_int(&C, m, "WAIT 1 5000"), 1);
    cluster_fx_kill(&C, m);
    ck_assert_int_eq(C.pid[m], 0);
    int p = cluster_fx_wait_promoted(&C, m, 20000);
    ck_assert_msg(p >= 0, "no replica took over from node %d", m);
    ck_assert_int_eq(p, C.nmasters + m * C.nreplicas);
    ck_assert_int_eq(cluster_fx_keys_on(&C, p, "{e}*"), 1);
    /* back, as the new master's replica, with the key */
    char err[400];
    ck_assert_msg(cluster_fx_restart(&C, m, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(cluster_fx_master_of_slot(&C, C.dead_slot[m]), p);
    ck_assert_int_eq(cluster_fx_int(&C, m, "READONLY"), 0);
    ck_assert_int_eq(cluster_fx_keys_on(&C, m, "{e}*"), 1);
}
END_TEST

/* A connection over TCP without the password is refused; the fixture's
 * own (authenticated) commands work, and so do failovers (the replicas
 * authenticate to their masters). */
static void password_case(const struct cluster_fx_opts *o)
{
    start(o);
    struct timeval tv = { 2, 0 };
    redisContext *rc = redisConnectWithTimeout("127.0.0.1", C.port[0], tv);
    ck_assert_msg(rc && !rc->err, "cannot connect to node 0");
    redisReply *r = redisCommand(rc, "GET x");
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->type, REDIS_REPLY_ERROR);
    ck_assert_msg(strstr(r->str, "NOAUTH") != NULL, "%s", r->str);
    freeReplyObject(r);
    redisFree(rc);
    int m = set_on_owner("{f}k");
    cluster_fx_kill(&C, m);
    ck_assert_int_ge(cluster_fx_wait_promoted(&C, m, 20000), 0);
    char err[400];
    ck_assert_msg(cluster_fx_restart(&C, m, err, sizeof err) == 0, "%s", err);
}

START_TEST(a_cluster_can_require_a_password)
{
    struct cluster_fx_opts o = { .password = "pw-for-test" };
    password_case(&o);
}
END_TEST

START_TEST(a_cluster_can_require_an_acl_user)
{
    struct cluster_fx_opts o = { .password = "pw-for-test", .user = "dq" };
    password_case(&o);
}
END_TEST

/* A TLS-only cluster: a plain connection to a node's port gets no
 * answer; replication and the cluster bus work over TLS (a failover). */
START_TEST(a_cluster_can_speak_only_tls)
{
    char certs[128], err[400], cmd[600];
    ck_assert_int_eq(tu_make_temp_dir("dqcerts", certs, sizeof certs, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "sh '%s' '%s' %s", TLS_CERTS_SCRIPT, certs, OPENSSL);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
    struct cluster_fx_opts o = { .tls_dir = certs };
    ck_assert_msg(cluster_fx_start(&C, 3, 1, &o, err, sizeof err) == 0, "%s", err);
    struct timeval tv = { 1, 0 };
    redisContext *rc = redisConnectWithTimeout("127.0.0.1", C.port[0], tv);
    ck_assert_msg(rc && !rc->err, "cannot connect to node 0");
    redisSetTimeout(rc, tv);
    redisReply *r = redisCommand(rc, "PING");
    ck_assert_msg(r == NULL, "a plain PING was answered");
    redisFree(rc);
    int m = set_on_owner("{g}k");
    cluster_fx_kill(&C, m);
    ck_assert_int_ge(cluster_fx_wait_promoted(&C, m, 20000), 0);
    ck_assert_msg(cluster_fx_restart(&C, m, err, sizeof err) == 0, "%s", err);
    tu_remove_tree(certs);
}
END_TEST

int main(void)
{
    char why[300];
    if (cluster_fx_available(why, sizeof why) < 0) {
        fprintf(stderr, "%s: skipping\n", why);
        return 77;
    }
    Suite *s = suite_create("cluster_fx");
    TCase *tc = fixture_tcase(s, "cluster", 60, NULL, NULL, setup, teardown);
    tcase_add_test(tc, slots_are_spread_over_the_masters);
    tcase_add_test(tc, a_moved_slot_takes_its_keys);
    tcase_add_test(tc, a_killed_master_is_replaced_by_its_replica);
    tc = fixture_tcase(s, "auth", 60, NULL, NULL, NULL, teardown);
    tcase_add_test(tc, a_cluster_can_require_a_password);
    tcase_add_test(tc, a_cluster_can_require_an_acl_user);
    if (access(OPENSSL, X_OK) == 0)
        tcase_add_test(tc, a_cluster_can_speak_only_tls);
    else
        printf("SKIP: the TLS cluster test: %s is missing (apt-get install openssl)\n", OPENSSL);
    return fixture_run_suite(s);
}
