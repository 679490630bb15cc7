/*
 * ui_api: the dashboard's JSON, for the charts app.js draws.
 *
 * GET /ui/api/history?queue=NAME (queue absent or empty: every queue
 * added up) answers the last hour, one element a second, oldest first:
 *   {"queue":"NAME"|null,"seconds":3600,"now_ms":<unix ms>,
 *    "done":[...],"failed":[...],"p50_ms":[...|null],"p99_ms":[...|null]}
 * from shared memory (ui_history.h): no Redis.  A queue the
 * configuration in force does not have is 404.
 */
#include "daemon/admin/ui_pages.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/admin/ui_history.h"
#include "daemon/admin/ui_html.h"

#define JSON_TYPE "application/json; charset=utf-8"

static int64_t unix_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int known_queue(const struct daemon_conf *dc, const char *queue)
{
    for (size_t i = 0; i < dc->nqueues; i++)
        if (strcmp(dc->queues[i].name, queue) == 0)
            return 1;
    return 0;
}

/* A lateness in us as ms ("12.345", trailing zeros cut), or null. */
static void put_ms(FILE *out, int32_t us)
{
    if (us < 0) {
        fputs("null", out);
        return;
    }
    char b[32];
    int n = snprintf(b, sizeof b, "%d.%03d", us / 1000, us % 1000);
    while (n > 0 && b[n - 1] == '0')
        n--;
    if (n > 0 && b[n - 1] == '.')
        n--;
    fwrite(b, 1, (size_t)n, out);
}

enum field { F_DONE, F_FAILED, F_P50, F_P99 };

static void put_array(FILE *out, const char *name, const struct ui_sample *s, size_t n,
                      enum field f)
{
    fprintf(out, ",\"%s\":[", name);
    for (size_t i = 0; i < n; i++) {
        if (i)
            fputc(',', out);
        switch (f) {
        case F_DONE: fprintf(out, "%u", (unsigned)s[i].done); break;
        case F_FAILED: fprintf(out, "%u", (unsigned)s[i].failed); break;
        case F_P50: put_ms(out, s[i].p50_us); break;
        case F_P99: put_ms(out, s[i].p99_us); break;
        }
    }
    fputc(']', out);
}

static void reply_error(struct ui_ctx *x, int code, const char *error)
{
    char b[128];
    int n = snprintf(b, sizeof b, "{\"error\":\"%s\"}\n", error);
    ui_ctx_reply(x, code, JSON_TYPE, b, (size_t)n);
}

void ui_api_history(struct ui_ctx *x)
{
    const struct ui_env *env = ui_ctx_env(x);
    const char *queue = ui_ctx_query(x, "queue");
    if (queue && !*queue)
        queue = NULL;
    if (queue && !known_queue(env->conf, queue)) {
        reply_error(x, 404, "unknown queue");
        return;
    }
    size_t n = UI_HISTORY_SECONDS;
    struct ui_sample *s = malloc(n * sizeof *s);
    char *body = NULL;
    size_t len = 0;
    FILE *out = s ? open_memstream(&body, &len) : NULL;
    if (!out) {
        free(s);
        reply_error(x, 500, "out of memory");
        return;
    }
    if (env->history)
        ui_history_series(env->history, queue, s, n);
    else
        for (size_t i = 0; i < n; i++)
            s[i] = (struct ui_sample){ 0, 0, -1, -1 };
    fputs("{\"queue\":", out);
    if (queue)
        json_string(out, queue);
    else
        fputs("null", out);
    fprintf(out, ",\"seconds\":%d,\"now_ms\":%lld", UI_HISTORY_SECONDS,
            (long long)unix_now_ms());
    put_array(out, "done", s, n, F_DONE);
    put_array(out, "failed", s, n, F_FAILED);
    put_array(out, "p50_ms", s, n, F_P50);
    put_array(out, "p99_ms", s, n, F_P99);
    fputs("}\n", out);
    free(s);
    if (fclose(out) != 0 || !body) {
        free(body);
        reply_error(x, 500, "out of memory");
        return;
    }
    ui_ctx_reply(x, 200, JSON_TYPE, body, len);
    free(body);
}
