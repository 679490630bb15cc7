#define _GNU_SOURCE /* asprintf */
#include "handler_test.h"

#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"

char ht_dir[256];
char ht_log_text[8192];
enum dq_log_level ht_log_level;

void ht_tmp_setup(void)
{
    char err[300];
    int made = tu_make_temp_dir("dqhandlers", ht_dir, sizeof ht_dir, err, sizeof err);
    ck_assert_msg(made == 0, "%s", err);
    ht_log_clear();
}

void ht_tmp_teardown(void)
{
    if (ht_dir[0] && tu_remove_tree(ht_dir) < 0)
        fprintf(stderr, "could not remove %s: %s\n", ht_dir, strerror(errno));
    ht_dir[0] = '\0';
}

const char *ht_path(const char *name)
{
    static char paths[4][512];
    static int next;
    char *p = paths[next++ % 4];
    snprintf(p, 512, "%s/%s", ht_dir, name);
    return p;
}

const char *ht_write(const char *name, const char *text, int mode)
{
    const char *path = ht_path(name);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(chmod(path, (mode_t)mode), 0);
    return path;
}

char *ht_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n < 2) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

const char *ht_handler_dir(void)
{
    return fixture_build_path("handlers/.libs");
}

const char *ht_plugin_dir(void)
{
    return fixture_build_path("tests/plugins/.libs");
}

void ht_log_clear(void)
{
    ht_log_text[0] = '\0';
    ht_log_level = DQ_LOG_DEBUG;
}

static void ht_log(enum dq_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void ht_log(enum dq_log_level level, const char *fmt, ...)
{
    size_t used = strlen(ht_log_text);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ht_log_text + used, sizeof ht_log_text - used, fmt, ap);
    va_end(ap);
    used = strlen(ht_log_text);
    if (used + 1 < sizeof ht_log_text) {
        ht_log_text[used] = '\n';
        ht_log_text[used + 1] = '\0';
    }
    ht_log_level = level;
}

int ht_open(struct ht *t, const char *dir, const char *file, const char *settings,
            int64_t timeout_ms, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    config_init(&t->cfg);
    char *text = NULL;
    ck_assert_int_ge(asprintf(&text,
                              "handler_dir = \"%s\";\n"
                              "handlers = (\n"
                              "  { type = \"order.cancel\"; file = \"%s\";\n"
                              "    settings = {\n%s\n    };\n"
                              "  }\n"
                              ");\n", dir ? dir : "", file, settings), 0);
    const char *conf = ht_write("handlers.conf", text, 0600);
    free(text);
    ck_assert_msg(config_read_file(&t->cfg, conf) == CONFIG_TRUE, "%s:%d: %s", conf,
                  config_error_line(&t->cfg), config_error_text(&t->cfg));
    const config_setting_t *list = config_lookup(&t->cfg, "handlers");
    ck_assert_ptr_nonnull(list);
    const config_setting_t *entry = config_setting_get_elem(list, 0);
    ck_assert_ptr_nonnull(entry);
    t->settings = settings_new(config_setting_get_member(entry, "settings"));
    ck_assert_ptr_nonnull(t->settings);
    t->host = settings_host(ht_log, timeout_ms);
    if (handler_load(&t->lh, dir, file, err, errlen) < 0
        || handler_init(&t->lh, &t->host, t->settings, err, errlen) < 0) {
        ht_close(t);
        return -1;
    }
    t->loaded = 1;
    return 0;
}

void ht_open_ok(struct ht *t, const char *dir, const char *file, const char *settings,
                int64_t timeout_ms)
{
    char err[1024];
    ck_assert_msg(ht_open(t, dir, file, settings, timeout_ms, err, sizeof err) == 0,
                  "%s", err);
}

void ht_close(struct ht *t)
{
    handler_unload(&t->lh);
    settings_free(t->settings);
    t->settings = NULL;
    config_destroy(&t->cfg);
    t->loaded = 0;
}

void ht_job(dq_handler_job *job, const void *payload, size_t len)
{
    memset(job, 0, sizeof *job);
    job->queue = "q1";
    job->id = "j-42";
    job->type = "order.cancel";
    job->payload = payload;
    job->payload_len = len;
    job->attempt = 2;
    job->max_attempts = 5;
    job->due_ms = INT64_C(1767225600000);
    job->created_ms = INT64_C(1767225500000);
    job->last_error = "";
    job->fence = INT64_C(4242);
}

dq_handler_result ht_run(struct ht *t, const void *payload, size_t len,
                         dq_handler_outcome *out)
{
    dq_handler_job job;
    ht_job(&job, payload, len);
    memset(out, 0x55, sizeof *out); /* handler_run must preset it */
    return handler_run(&t->lh, &job, out);
}
