/* The daemon's walk over every partition of every queue: each one once,
 * in order, with the keys of its partition under the configured prefix,
 * and the prefix resolved when the file is loaded. */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "daemon/dconfig.h"
#include "daemon/dconfig_parts.h"
#include "fixture.h"

START_TEST(every_partition_of_every_queue_once_in_order)
{
    struct queue_conf queues[3] = {
        { .name = "emails", .partitions = 3 },
        { .name = "sms", .partitions = 1 },
        { .name = "big", .partitions = 4 },
    };
    struct daemon_conf dc = { .queues = queues, .nqueues = 3,
                              .redis = { .prefix = "jobs" } };
    static const struct { size_t queue; unsigned part; } want[] = {
        { 0, 0 }, { 0, 1 }, { 0, 2 }, { 1, 0 }, { 2, 0 }, { 2, 1 }, { 2, 2 }, { 2, 3 },
    };
    ck_assert_uint_eq(dconfig_parts_count(&dc), 8);
    struct dconfig_part it;
    size_t n = 0;
    for (dconfig_parts_begin(&it, &dc); dconfig_parts_next(&it); n++) {
        ck_assert_uint_lt(n, 8);
        ck_assert_uint_eq(it.at, n);
        ck_assert_uint_eq(it.queue, want[n].queue);
        ck_assert_ptr_eq(it.q, &queues[want[n].queue]);
        ck_assert_uint_eq(it.part, want[n].part);
        ck_assert_uint_eq(it.nparts, (unsigned)queues[want[n].queue].partitions);
        struct queue_keys k;
        keys_build_part(&k, "jobs", it.q->name, it.part, it.nparts);
        for (size_t j = 0; j < KEYS_PER_SCRIPT; j++)
            ck_assert_str_eq(it.keys.key[j], k.key[j]);
        ck_assert_str_eq(it.keys.wake, k.wake);
        ck_assert_msg(strncmp(it.keys.key[0], "jobs:", 5) == 0, "%s", it.keys.key[0]);
    }
    ck_assert_uint_eq(n, 8);
    ck_assert_int_eq(dconfig_parts_next(&it), 0);   /* stays at the end */

    struct daemon_conf none = { .redis = { .prefix = "jobs" } };
    dconfig_parts_begin(&it, &none);
    ck_assert_int_eq(dconfig_parts_next(&it), 0);
    ck_assert_uint_eq(dconfig_parts_count(&none), 0);
}
END_TEST

/* A file without redis.prefix gets the default once, at load: the
 * daemon's modules read dc->redis.prefix and never meet NULL. */
START_TEST(the_prefix_is_resolved_at_load)
{
    char dir[] = "/tmp/dq-parts-XXXXXX", path[64], err[512] = "";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/delayqd.conf", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("queues = ( { name = \"emails\"; partitions = 2; } );\n", f);
    ck_assert_int_eq(fclose(f), 0);
    struct daemon_conf dc;
    ck_assert_msg(dconfig_load(&dc, path, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(dc.redis.prefix, DQ_DEFAULT_PREFIX);
    struct dconfig_part it;
    dconfig_parts_begin(&it, &dc);
    ck_assert(dconfig_parts_next(&it));
    ck_assert_msg(strncmp(it.keys.key[0], DQ_DEFAULT_PREFIX ":", 3) == 0, "%s",
                  it.keys.key[0]);
    dconfig_free(&dc);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* The retry policy of a job: the queue's backoff, the limit of its
 * type's handler entry, else the queue's. */
START_TEST(retry_policy_takes_the_handlers_limit)
{
    struct handler_conf h = { .type = "resize", .max_attempts = 9 };
    struct queue_conf q = { .name = "img", .partitions = 1 };
    dq_retry_policy_init(&q.retry);
    q.retry.default_max_attempts = 3;
    q.retry.base_ms = 777;
    struct daemon_conf dc = { .queues = &q, .nqueues = 1, .handlers = &h, .nhandlers = 1 };
    dq_retry_policy p = dconfig_retry_for(&dc, &q, "resize");
    ck_assert_int_eq(p.default_max_attempts, 9);
    ck_assert_int_eq(p.base_ms, 777);
    p = dconfig_retry_for(&dc, &q, "other");
    ck_assert_int_eq(p.default_max_attempts, 3);
    p = dconfig_retry_for(&dc, &q, NULL);
    ck_assert_int_eq(p.default_max_attempts, 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dconfig_parts");
    TCase *tc = fixture_tcase(s, "parts", 10, NULL, NULL, NULL, NULL);
    tcase_add_test(tc, every_partition_of_every_queue_once_in_order);
    tcase_add_test(tc, the_prefix_is_resolved_at_load);
    tcase_add_test(tc, retry_policy_takes_the_handlers_limit);
    return fixture_run_suite(s);
}
