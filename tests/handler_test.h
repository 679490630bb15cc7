/*
 * Shared by the check_handlers program: a temporary directory per test, a
 * handler loaded through the real loader with settings parsed by libconfig
 * from a real file, a job to run, and a log service that keeps what the
 * handler logged.
 */
#ifndef DQ_HANDLER_TEST_H
#define DQ_HANDLER_TEST_H

#include <delayq/handler.h>
#include <libconfig.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/worker/handler_loader.h"
#include "daemon/worker/settings.h"
#include "fixture.h"

/* The per-test directory (checked fixture: ht_tmp_setup/ht_tmp_teardown). */
extern char ht_dir[256];
void ht_tmp_setup(void);
void ht_tmp_teardown(void);

/* DIR/NAME in a rotating static buffer. */
const char *ht_path(const char *name);

/* Write `text` to ht_path(name) with `mode`; returns the path. */
const char *ht_write(const char *name, const char *text, int mode);

/* The whole file, malloc'd (NUL-terminated; *len if len), or NULL. */
char *ht_read(const char *path, size_t *len);

/* Where the built handlers and test plugins are. */
const char *ht_handler_dir(void);
const char *ht_plugin_dir(void);

/* Everything the handlers logged since the last ht_log_clear, one line
 * each; and the level of the last line. */
extern char ht_log_text[8192];
extern enum dq_log_level ht_log_level;
void ht_log_clear(void);

/* A handler ready to run, with its config and settings. */
struct ht {
    config_t cfg;
    dq_settings *settings;
    dq_host host;
    struct loaded_handler lh;
    int loaded;
};

/*
 * Write a config file with one handler entry whose settings group holds
 * `settings` (libconfig text, may be ""), load `file` from `dir`, and init
 * it with the type timeout `timeout_ms`.  Returns 0, or -1 with the
 * loader's message in err (t is then closed).
 */
int ht_open(struct ht *t, const char *dir, const char *file, const char *settings,
            int64_t timeout_ms, char *err, size_t errlen);

/* The same, failing the test on error. */
void ht_open_ok(struct ht *t, const char *dir, const char *file, const char *settings,
                int64_t timeout_ms);

void ht_close(struct ht *t);

/* Run a job with this payload (len bytes) through t. */
dq_handler_result ht_run(struct ht *t, const void *payload, size_t len,
                         dq_handler_outcome *out);

/* A job as the worker would pass it. */
void ht_job(dq_handler_job *job, const void *payload, size_t len);

/* The test cases of the other files, added to `s`. */
void add_exec_tcase(Suite *s);
void add_http_tcase(Suite *s);
void add_redis_tcase(Suite *s);

#endif
