/* Where a key lives in Redis Cluster, which partition a job id is in, and
 * what the cluster's redirections say: the facts every router relies on. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "redis/cluster_map.h"
#include "lib/keys.h"

static unsigned slot_of(const char *key)
{
    return cluster_keyslot(key, strlen(key));
}

/* The reference values are those of Redis's CLUSTER KEYSLOT. */
START_TEST(key_slots_match_redis)
{
    ck_assert_uint_eq(cluster_crc16("123456789", 9), 0x31c3);
    ck_assert_uint_eq(slot_of("foo"), 12182);
    ck_assert_uint_eq(slot_of("bar"), 5061);
    ck_assert_uint_eq(slot_of("{user1000}.following"), slot_of("user1000"));
    ck_assert_uint_eq(slot_of("dq:{orders}:jobs"), slot_of("dq:{orders}:dead"));
    /* an empty tag hashes the whole key; only the first tag counts */
    ck_assert_uint_eq(slot_of("{}foo"), cluster_crc16("{}foo", 5) % CLUSTER_SLOTS);
    ck_assert_uint_eq(slot_of("a{b}{c}"), slot_of("b"));
    ck_assert_uint_eq(slot_of("a{bc"), cluster_crc16("a{bc", 4) % CLUSTER_SLOTS);
}
END_TEST

START_TEST(partition_keys_carry_their_own_tag)
{
    struct queue_keys one, p0, p7;
    keys_build(&one, "dq", "orders");
    keys_build_part(&p0, "dq", "orders", 0, 1);
    ck_assert_str_eq(p0.key[0], one.key[0]);   /* N = 1: today's layout */
    ck_assert_str_eq(p0.wake, "dq:{orders}:wake");
    keys_build_part(&p7, "dq", "orders", 7, 12);
    ck_assert_str_eq(p7.key[0], "dq:{orders:7}:jobs");
    ck_assert_str_eq(p7.key[5], "dq:{orders:7}:lease");
    ck_assert_str_eq(p7.wake, "dq:{orders:7}:wake");
    for (int i = 1; i < KEYS_PER_SCRIPT; i++)
        ck_assert_uint_eq(slot_of(p7.key[i]), slot_of(p7.key[0]));
}
END_TEST

START_TEST(a_job_id_names_its_partition)
{
    ck_assert_uint_eq(keys_partition_of("12345", 1), 0);
    ck_assert_uint_eq(keys_partition_of("anything", 1), 0);
    /* generated ids: seq * N + partition */
    ck_assert_uint_eq(keys_partition_of("40", 12), 4);
    /* longer than 64 bits: 2^64 + 1 = 18446744073709551617, which is 7 mod 10 */
    ck_assert_uint_eq(keys_partition_of("18446744073709551617", 10), 7);
    /* user ids: CRC16 mod N, the same every time */
    ck_assert_uint_eq(keys_partition_of("order-42", 12), cluster_crc16("order-42", 8) % 12);
    unsigned seen[12] = { 0 };
    char id[32];
    for (int i = 0; i < 1200; i++) {
        snprintf(id, sizeof id, "order-%d", i);
        seen[keys_partition_of(id, 12)]++;
    }
    for (int p = 0; p < 12; p++)
        ck_assert_msg(seen[p] > 50, "partition %d got %u of 1200 ids", p, seen[p]);
}
END_TEST

START_TEST(redirections_are_read)
{
    unsigned slot = 0;
    char host[64];
    int port = 0;
    ck_assert_int_eq(cluster_parse_redirect("MOVED 3999 127.0.0.1:6381", &slot, host,
                                            sizeof host, &port), CLUSTER_MOVED);
    ck_assert_uint_eq(slot, 3999);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_int_eq(port, 6381);
    ck_assert_int_eq(cluster_parse_redirect("ASK 12 ::1:7000", &slot, host, sizeof host,
                                            &port), CLUSTER_ASK);
    ck_assert_str_eq(host, "::1");
    ck_assert_int_eq(port, 7000);
    ck_assert_int_eq(cluster_parse_redirect("MOVED 99999 h:1", &slot, host, sizeof host,
                                            &port), 0);
    ck_assert_int_eq(cluster_parse_redirect("MOVED 1 nohost", &slot, host, sizeof host,
                                            &port), 0);
    ck_assert_int_eq(cluster_parse_redirect("ERR wrong", &slot, host, sizeof host, &port), 0);
}
END_TEST

/* A CLUSTER SLOTS reply built by hand: two masters, one with an empty
 * host (taken to be the node asked). */
START_TEST(slot_maps_are_read_and_bad_ones_refused)
{
    redisReply h1 = { .type = REDIS_REPLY_STRING, .str = "10.0.0.1", .len = 8 };
    redisReply h2 = { .type = REDIS_REPLY_STRING, .str = "", .len = 0 };
    redisReply p1 = { .type = REDIS_REPLY_INTEGER, .integer = 7000 };
    redisReply p2 = { .type = REDIS_REPLY_INTEGER, .integer = 7001 };
    redisReply *n1e[] = { &h1, &p1 }, *n2e[] = { &h2, &p2 };
    redisReply n1 = { .type = REDIS_REPLY_ARRAY, .elements = 2, .element = n1e };
    redisReply n2 = { .type = REDIS_REPLY_ARRAY, .elements = 2, .element = n2e };
    redisReply s0 = { .type = REDIS_REPLY_INTEGER, .integer = 0 };
    redisReply e0 = { .type = REDIS_REPLY_INTEGER, .integer = 8191 };
    redisReply s1 = { .type = REDIS_REPLY_INTEGER, .integer = 8192 };
    redisReply e1 = { .type = REDIS_REPLY_INTEGER, .integer = 16383 };
    redisReply *r0e[] = { &s0, &e0, &n1 }, *r1e[] = { &s1, &e1, &n2 };
    redisReply r0 = { .type = REDIS_REPLY_ARRAY, .elements = 3, .element = r0e };
    redisReply r1 = { .type = REDIS_REPLY_ARRAY, .elements = 3, .element = r1e };
    redisReply *alle[] = { &r0, &r1 };
    redisReply all = { .type = REDIS_REPLY_ARRAY, .elements = 2, .element = alle };

    struct cluster_map m;
    cluster_map_init(&m);
    char err[200];
    ck_assert_int_eq(cluster_map_load(&m, &all, "10.0.0.9", err, sizeof err), 0);
    ck_assert_uint_eq(m.nnodes, 2);
    ck_assert_str_eq(m.nodes[cluster_map_lookup(&m, 0)].host, "10.0.0.1");
    ck_assert_str_eq(m.nodes[cluster_map_lookup(&m, 16383)].host, "10.0.0.9");
    ck_assert_int_eq(m.nodes[cluster_map_lookup(&m, 8192)].port, 7001);

    e1.integer = 16384;     /* out of bounds: refused, map kept */
    ck_assert_int_eq(cluster_map_load(&m, &all, "x", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "out of bounds"));
    ck_assert_uint_eq(m.nnodes, 2);
    redisReply error = { .type = REDIS_REPLY_ERROR, .str = "ERR This instance has cluster "
                                                           "support disabled" };
    ck_assert_int_eq(cluster_map_load(&m, &error, "x", err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "cluster support disabled"));
    cluster_map_free(&m);
    ck_assert_uint_eq(cluster_map_lookup(&m, 5), CLUSTER_NO_NODE);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cluster_map");
    TCase *tc = fixture_tcase(s, "map", 10, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, key_slots_match_redis);
    tcase_add_test(tc, partition_keys_carry_their_own_tag);
    tcase_add_test(tc, a_job_id_names_its_partition);
    tcase_add_test(tc, redirections_are_read);
    tcase_add_test(tc, slot_maps_are_read_and_bad_ones_refused);
    return fixture_run_suite(s);
}
