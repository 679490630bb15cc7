/*
 * Handlers: the loader's checks and guards, the settings accessors, and the
 * shipped handlers (log here; exec, http and redis in check_handlers_*.c),
 * each loaded from the built .so through the real loader.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "handler_test.h"

/* Copy the built handler `name` to DIR/`as` with `mode`; returns the path. */
static const char *copy_handler(const char *name, const char *as, int mode)
{
    char src[512];
    snprintf(src, sizeof src, "%s/%s", ht_handler_dir(), name);
    size_t len;
    char *data = ht_read(src, &len);
    ck_assert_msg(data != NULL, "cannot read %s (built?)", src);
    const char *dst = ht_path(as);
    FILE *f = fopen(dst, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
    free(data);
    ck_assert_int_eq(chmod(dst, (mode_t)mode), 0);
    return dst;
}

/* Expect handler_load(dir, file) to fail with exactly `want`. */
static void load_fails(const char *dir, const char *file, const char *want)
{
    struct loaded_handler h;
    char err[1024];
    ck_assert_int_eq(handler_load(&h, dir, file, err, sizeof err), -1);
    ck_assert_str_eq(err, want);
    ck_assert_ptr_null(h.dl);
    ck_assert_ptr_null(h.path);
    handler_unload(&h); /* harmless on a failed load */
}

static char want[1024];

START_TEST(loader_refuses_a_missing_file)
{
    snprintf(want, sizeof want, "handler %s/nope.so: No such file or directory", ht_dir);
    load_fails(ht_dir, "nope.so", want);
    load_fails(NULL, "log.so", "handler log.so: a relative file needs a handler_dir");
}
END_TEST

START_TEST(loader_refuses_files_others_can_write)
{
    copy_handler("log.so", "log.so", 0666);
    snprintf(want, sizeof want, "handler %s/log.so: refusing a file that others can "
             "write to (mode 0666)", ht_dir);
    load_fails(ht_dir, "log.so", want);

    ck_assert_int_eq(chmod(ht_path("log.so"), 0620), 0);
    snprintf(want, sizeof want, "handler %s/log.so: refusing a file that others can "
             "write to (mode 0620)", ht_dir);
    load_fails(ht_dir, "log.so", want);

    /* A safe file in a directory anybody can write to. */
    ck_assert_int_eq(chmod(ht_path("log.so"), 0755), 0);
    ck_assert_int_eq(chmod(ht_dir, 0777), 0);
    snprintf(want, sizeof want, "handler %s/log.so: refusing a file in a directory "
             "that others can write to (%s, mode 0777)", ht_dir, ht_dir);
    load_fails(ht_dir, "log.so", want);
    ck_assert_int_eq(chmod(ht_dir, 0700), 0);

    /* Owned by somebody else (only root can give a file away). */
    if (geteuid() == 0) {
        ck_assert_int_eq(chown(ht_path("log.so"), 1234, 0), 0);
        snprintf(want, sizeof want, "handler %s/log.so: refusing a file owned by uid "
                 "1234 (only root or uid 0 may own it)", ht_dir);
        load_fails(ht_dir, "log.so", want);
        ck_assert_int_eq(chown(ht_path("log.so"), 0, 0), 0);
    }

    /* Through a symlink, the real file's directory counts too. */
    ck_assert_int_eq(mkdir(ht_path("real"), 0777), 0);
    ck_assert_int_eq(chmod(ht_path("real"), 0777), 0);
    ck_assert_int_eq(rename(ht_path("log.so"), ht_path("real/log.so")), 0);
    ck_assert_int_eq(symlink("real/log.so", ht_path("link.so")), 0);
    snprintf(want, sizeof want, "handler %s/link.so: refusing a file in a directory "
             "that others can write to (%s/real, mode 0777)", ht_dir, ht_dir);
    load_fails(ht_dir, "link.so", want);
}
END_TEST

START_TEST(loader_refuses_what_is_not_a_handler)
{
    const char *pd = ht_plugin_dir();
    snprintf(want, sizeof want, "handler %s/noabi.so: no symbol dq_handler_v1: not a "
             "delayq handler, or built for another ABI", pd);
    load_fails(pd, "noabi.so", want);
    snprintf(want, sizeof want, "handler %s/wrongabi.so: built for handler ABI 2, but "
             "this delayqd runs ABI 1 handlers", pd);
    load_fails(pd, "wrongabi.so", want);

    /* Not an object at all: dlerror() says why. */
    ht_write("junk.so", "#!/bin/sh\necho not a library\n", 0755);
    struct loaded_handler h;
    char err[1024];
    ck_assert_int_eq(handler_load(&h, ht_dir, "junk.so", err, sizeof err), -1);
    snprintf(want, sizeof want, "handler %s/junk.so: cannot load: ", ht_dir);
    ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "%s", err);
    ck_assert_msg(strstr(err + strlen(want), "junk.so") != NULL, "no dlerror: %s", err);

    ck_assert_int_eq(mkdir(ht_path("dir.so"), 0700), 0);
    snprintf(want, sizeof want, "handler %s/dir.so: not a regular file", ht_dir);
    load_fails(ht_dir, "dir.so", want);
}
END_TEST

START_TEST(loader_shares_one_object_between_types)
{
    /* An absolute file ignores the directory. */
    char abs[512];
    snprintf(abs, sizeof abs, "%s/log.so", ht_handler_dir());
    struct ht a, b;
    ht_open_ok(&a, "/nonexistent", abs, "level = \"warn\";", 0);
    ht_open_ok(&b, ht_handler_dir(), "log.so", "level = \"debug\";", 0);
    ck_assert_ptr_eq(a.lh.dl, b.lh.dl);   /* mapped once */
    ck_assert_ptr_ne(a.lh.state, b.lh.state);
    ck_assert_str_eq(handler_name(&a.lh), "log");
    ht_close(&a);
    /* b still holds a reference, and its own settings. */
    dq_handler_outcome out;
    ck_assert_int_eq(ht_run(&b, "x", 1, &out), DQ_HANDLER_OK);
    ck_assert_int_eq(ht_log_level, DQ_LOG_DEBUG);
    ck_assert_ptr_nonnull(strstr(ht_log_text, "job q1/j-42"));
    ht_close(&b);
}
END_TEST

/* Parse `text` from a file into cfg; the settings of handlers.[0]. */
static const config_setting_t *parse_settings(config_t *cfg, const char *text,
                                              const char **conf)
{
    *conf = ht_write("settings.conf", text, 0600);
    config_init(cfg);
    ck_assert_msg(config_read_file(cfg, *conf) == CONFIG_TRUE, "%s",
                  config_error_text(cfg));
    const config_setting_t *entry = config_setting_get_elem(config_lookup(cfg, "handlers"), 0);
    ck_assert_ptr_nonnull(entry);
    return config_setting_get_member(entry, "settings");
}

START_TEST(settings_read_each_type)
{
    config_t cfg;
    const char *conf;
    const config_setting_t *g = parse_settings(&cfg,
        "handlers = ( { settings = {\n"
        "  s = \"str\"; i = 42; big = 5000000000L; b = true;\n"
        "  d = \"1m30s\"; dn = 45; l = [\"a\", \"b\"]; mixed = (\"c\", \"d\");\n"
        "}; } );\n", &conf);
    dq_settings *s = settings_new(g);
    dq_host h = settings_host(NULL, 1500);
    ck_assert_uint_eq(h.size, sizeof(dq_host));
    ck_assert_int_eq(h.abi_version, DQ_HANDLER_ABI_VERSION);
    ck_assert_int_eq(h.timeout_ms, 1500);
    ck_assert_str_eq(h.setting_string(s, "s", "def"), "str");
    ck_assert_str_eq(h.setting_string(s, "absent", "def"), "def");
    ck_assert_int_eq(h.setting_int(s, "i", 0), 42);
    ck_assert_int_eq(h.setting_int(s, "big", 0), INT64_C(5000000000));
    ck_assert_int_eq(h.setting_int(s, "absent", -7), -7);
    ck_assert_int_eq(h.setting_bool(s, "b", 0), 1);
    ck_assert_int_eq(h.setting_bool(s, "absent", 1), 1);
    ck_assert_int_eq(h.setting_duration_ms(s, "d", 0), 90000);
    ck_assert_int_eq(h.setting_duration_ms(s, "dn", 0), 45000);
    ck_assert_int_eq(h.setting_duration_ms(s, "absent", 123), 123);
    ck_assert_uint_eq(h.setting_list_len(s, "l"), 2);
    ck_assert_str_eq(h.setting_list_item(s, "l", 1), "b");
    ck_assert_ptr_null(h.setting_list_item(s, "l", 2));
    ck_assert_str_eq(h.setting_list_item(s, "mixed", 0), "c");
    ck_assert_uint_eq(h.setting_list_len(s, "absent"), 0);
    ck_assert_ptr_null(h.setting_list_item(s, "absent", 0));
    ck_assert_ptr_null(h.setting_error(s));
    char unread[256];
    ck_assert_int_eq(settings_unread(s, unread, sizeof unread), 0);
    settings_free(s);

    /* No settings group at all: every default, no error. */
    s = settings_new(NULL);
    ck_assert_str_eq(h.setting_string(s, "s", "def"), "def");
    ck_assert_uint_eq(h.setting_list_len(s, "l"), 0);
    ck_assert_ptr_null(h.setting_error(s));
    settings_free(s);
    config_destroy(&cfg);
}
END_TEST

/* The host services added after ABI 1's first release: groups of strings,
 * and a handler's refusal of a value, located at its file and line. */
START_TEST(settings_groups_and_refusals)
{
    config_t cfg;
    const char *conf;
    const config_setting_t *g = parse_settings(&cfg,
        "handlers = ( { settings = {\n"
        "  env = { A = \"1\";\n"
        "          B = \"two\"; };\n"
        "  n = { C = 3; };\n"
        "  l = [\"x\", \"y\"];\n"
        "}; } );\n", &conf);
    dq_settings *s = settings_new(g);
    dq_host h = settings_host(NULL, 0);
    ck_assert(DQ_HOST_HAS(&h, setting_group_len));
    ck_assert(DQ_HOST_HAS(&h, setting_reject));
    dq_host old = h;
    old.size = offsetof(dq_host, setting_group_len); /* a daemon of the first release */
    ck_assert(!DQ_HOST_HAS(&old, setting_group_len));

    const char *value;
    ck_assert_uint_eq(h.setting_group_len(s, "env"), 2);
    ck_assert_str_eq(h.setting_group_item(s, "env", 0, &value), "A");
    ck_assert_str_eq(value, "1");
    ck_assert_str_eq(h.setting_group_item(s, "env", 1, &value), "B");
    ck_assert_str_eq(value, "two");
    ck_assert_ptr_null(h.setting_group_item(s, "env", 2, &value));
    ck_assert_ptr_null(value);
    ck_assert_uint_eq(h.setting_group_len(s, "absent"), 0);
    ck_assert_ptr_null(h.setting_error(s));

    char exp[512];
    ck_assert_str_eq(h.setting_group_item(s, "n", 0, &value), "C");
    ck_assert_ptr_null(value);
    snprintf(exp, sizeof exp, "%s:4: handlers.[0].settings.n.C: expected a string", conf);
    ck_assert_str_eq(h.setting_error(s), exp);

    settings_clear_error(s);
    ck_assert_uint_eq(h.setting_group_len(s, "l"), 0);
    snprintf(exp, sizeof exp, "%s:5: handlers.[0].settings.l: expected a group of "
             "strings, such as { KEY = \"value\"; }", conf);
    ck_assert_str_eq(h.setting_error(s), exp);

    /* A refusal points at the member, the element, or the setting. */
    settings_clear_error(s);
    h.setting_reject(s, "env", 1, "not today");
    snprintf(exp, sizeof exp, "%s:3: handlers.[0].settings.env.B: not today", conf);
    ck_assert_str_eq(h.setting_error(s), exp);
    h.setting_reject(s, "l", 0, "the first problem stays");
    ck_assert_str_eq(h.setting_error(s), exp);
    settings_clear_error(s);
    h.setting_reject(s, "l", 1, "no y");
    snprintf(exp, sizeof exp, "%s:5: handlers.[0].settings.l.[1]: no y", conf);
    ck_assert_str_eq(h.setting_error(s), exp);
    settings_clear_error(s);
    h.setting_reject(s, "env", DQ_SETTING_WHOLE, "too many");
    snprintf(exp, sizeof exp, "%s:2: handlers.[0].settings.env: too many", conf);
    ck_assert_str_eq(h.setting_error(s), exp);
    settings_clear_error(s);
    h.setting_reject(s, "absent", 0, "is required");
    snprintf(exp, sizeof exp, "%s:1: handlers.[0].settings: absent: is required", conf);
    ck_assert_str_eq(h.setting_error(s), exp);
    settings_free(s);
    config_destroy(&cfg);
}
END_TEST

START_TEST(settings_type_errors_name_file_and_line)
{
    config_t cfg;
    const char *conf;
    const config_setting_t *g = parse_settings(&cfg,
        "handlers = (\n"
        "  { type = \"a\"; file = \"log.so\"; },\n"
        "  { type = \"b\"; file = \"exec.so\";\n"
        "    settings = {\n"
        "      level = 3;\n"
        "      argv = (\"/bin/true\", 7);\n"
        "      timeout = \"10x\";\n"
        "      flag = \"yes\";\n"
        "    };\n"
        "  }\n"
        ");\n", &conf);
    (void)g;
    const config_setting_t *entry = config_setting_get_elem(config_lookup(&cfg, "handlers"), 1);
    dq_settings *s = settings_new(config_setting_get_member(entry, "settings"));
    dq_host h = settings_host(NULL, 0);
    char exp[512];

    ck_assert_str_eq(h.setting_string(s, "level", "info"), "info");
    snprintf(exp, sizeof exp, "%s:5: handlers.[1].settings.level: expected a string", conf);
    ck_assert_str_eq(h.setting_error(s), exp);
    /* The first problem stays. */
    ck_assert_int_eq(h.setting_bool(s, "flag", 0), 0);
    ck_assert_str_eq(h.setting_error(s), exp);

    settings_clear_error(s);
    ck_assert_uint_eq(h.setting_list_len(s, "argv"), 2);
    ck_assert_ptr_null(h.setting_list_item(s, "argv", 1));
    snprintf(exp, sizeof exp, "%s:6: handlers.[1].settings.argv.[1]: expected a string", conf);
    ck_assert_str_eq(h.setting_error(s), exp);

    settings_clear_error(s);
    ck_assert_int_eq(h.setting_duration_ms(s, "timeout", 5), 5);
    snprintf(exp, sizeof exp, "%s:7: handlers.[1].settings.timeout: expected a duration "
             "such as \"30s\": unknown unit (use ms, s, m, h or d)", conf);
    ck_assert_str_eq(h.setting_error(s), exp);

    settings_clear_error(s);
    ck_assert_int_eq(h.setting_int(s, "flag", 9), 9);
    snprintf(exp, sizeof exp, "%s:8: handlers.[1].settings.flag: expected an integer", conf);
    ck_assert_str_eq(h.setting_error(s), exp);

    settings_clear_error(s);
    ck_assert_uint_eq(h.setting_list_len(s, "level"), 0);
    snprintf(exp, sizeof exp, "%s:5: handlers.[1].settings.level: expected a list of "
             "strings, such as [\"a\", \"b\"]", conf);
    ck_assert_str_eq(h.setting_error(s), exp);
    settings_free(s);
    config_destroy(&cfg);

    /* Through a handler's init, with the loader's prefix. */
    struct ht t;
    char err[1024];
    ck_assert_int_eq(ht_open(&t, ht_handler_dir(), "log.so", "level = 3;", 0, err,
                             sizeof err), -1);
    snprintf(exp, sizeof exp, "handler %s/log.so: %s:5: handlers.[0].settings.level: "
             "expected a string", ht_handler_dir(), ht_path("handlers.conf"));
    ck_assert_str_eq(err, exp);
}
END_TEST

START_TEST(loader_guards_against_careless_handlers)
{
    const char *pd = ht_plugin_dir();
    struct ht t;
    char err[1024];
    ck_assert_int_eq(ht_open(&t, pd, "oddball.so", "refuse = true;", 0, err, sizeof err), -1);
    snprintf(want, sizeof want, "handler %s/oddball.so: oddball: refused as asked", pd);
    ck_assert_str_eq(err, want);

    /* init returned 0 without looking at setting_error: failed anyway, after
     * its fini. */
    unsetenv("ODDBALL_FINI");
    ck_assert_int_eq(ht_open(&t, pd, "oddball.so", "count = \"many\";", 0, err,
                             sizeof err), -1);
    ck_assert_msg(strstr(err, "handlers.[0].settings.count: expected an integer") != NULL,
                  "%s", err);
    ck_assert_str_eq(getenv("ODDBALL_FINI"), "called");

    unsetenv("ODDBALL_FINI");
    ht_open_ok(&t, pd, "oddball.so", "count = 2;", 0);
    dq_handler_outcome out;
    ck_assert_int_eq(ht_run(&t, "fine", 4, &out), DQ_HANDLER_OK);
    ck_assert_int_eq(out.retry_delay_ms, -1);
    ck_assert_str_eq(out.error, "");
    ck_assert_int_eq(ht_run(&t, "odd", 3, &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "handler oddball returned 7, which is not OK, RETRY or FAIL");
    ck_assert_int_eq(ht_run(&t, "silent", 6, &out), DQ_HANDLER_RETRY);
    ck_assert_str_eq(out.error, "handler oddball gave no reason");
    ck_assert_int_eq(out.retry_delay_ms, -1);
    ck_assert_int_eq(ht_run(&t, "lines", 5, &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "first second  third");
    ck_assert_int_eq(ht_run(&t, "late", 4, &out), DQ_HANDLER_RETRY);
    ck_assert_int_eq(out.retry_delay_ms, -1);

    /* fini runs once: handler_fini, then not again at unload. */
    ck_assert_ptr_null(getenv("ODDBALL_FINI"));
    handler_fini(&t.lh);
    ck_assert_str_eq(getenv("ODDBALL_FINI"), "called");
    unsetenv("ODDBALL_FINI");
    ck_assert_int_eq(ht_run(&t, "fine", 4, &out), DQ_HANDLER_FAIL);
    ck_assert_str_eq(out.error, "handler oddball is not initialised");
    ht_close(&t);
    ck_assert_ptr_null(getenv("ODDBALL_FINI"));
}
END_TEST

START_TEST(log_handler_logs_one_line)
{
    struct ht t;
    ht_open_ok(&t, ht_handler_dir(), "log.so", "", 0);
    dq_handler_outcome out;
    ck_assert_int_eq(ht_run(&t, "hello", 5, &out), DQ_HANDLER_OK);
    ck_assert_str_eq(ht_log_text,
                     "job q1/j-42 type=order.cancel attempt=2/5 payload=5 bytes: hello\n");
    ck_assert_int_eq(ht_log_level, DQ_LOG_INFO);
    ht_log_clear();
    static const char binary[] = { 'a', 0, 'b', 0 };
    ck_assert_int_eq(ht_run(&t, binary, 3, &out), DQ_HANDLER_OK);
    ck_assert_str_eq(ht_log_text, "job q1/j-42 type=order.cancel attempt=2/5 payload=3 bytes\n");
    ht_close(&t);

    ht_open_ok(&t, ht_handler_dir(), "log.so", "level = \"warn\";", 0);
    ck_assert_int_eq(ht_run(&t, "x", 1, &out), DQ_HANDLER_OK);
    ck_assert_int_eq(ht_log_level, DQ_LOG_WARN);
    ht_close(&t);

    char err[1024];
    ck_assert_int_eq(ht_open(&t, ht_handler_dir(), "log.so", "level = \"loud\";", 0,
                             err, sizeof err), -1);
    snprintf(want, sizeof want, "handler %s/log.so: log: level \"loud\": expected debug, "
             "info, warn or err", ht_handler_dir());
    ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(unread_settings_are_reported)
{
    struct ht t;
    ht_open_ok(&t, ht_handler_dir(), "log.so", "level = \"info\";\nlevle = \"warn\";", 0);
    snprintf(want, sizeof want, "%s:6: handlers.[0].settings.levle: not a setting that "
             "handler log reads (ignored)\n", ht_path("handlers.conf"));
    ck_assert_str_eq(ht_log_text, want);
    ck_assert_int_eq(ht_log_level, DQ_LOG_WARN);
    ht_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("handlers");
    TCase *tc = fixture_tcase(s, "loader", 10, NULL, NULL, ht_tmp_setup, ht_tmp_teardown);
    tcase_add_test(tc, loader_refuses_a_missing_file);
    tcase_add_test(tc, loader_refuses_files_others_can_write);
    tcase_add_test(tc, loader_refuses_what_is_not_a_handler);
    tcase_add_test(tc, loader_shares_one_object_between_types);
    tcase_add_test(tc, settings_read_each_type);
    tcase_add_test(tc, settings_type_errors_name_file_and_line);
    tcase_add_test(tc, settings_groups_and_refusals);
    tcase_add_test(tc, loader_guards_against_careless_handlers);
    tcase_add_test(tc, log_handler_logs_one_line);
    tcase_add_test(tc, unread_settings_are_reported);
    add_exec_tcase(s);
    add_http_tcase(s);
    add_redis_tcase(s);
    return fixture_run_suite(s);
}
