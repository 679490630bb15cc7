/*
 * A test plugin that misbehaves on request, for the loader's guards:
 *   settings: refuse = true    init fails with a reason
 *             count = N        read without checking setting_error
 *   payload:  "odd"            handle returns 7, outside the enum
 *             "silent"         RETRY without a reason
 *             "lines"          an error with line breaks
 *             "late"           RETRY with retry_delay_ms -5
 * and sets the environment variable ODDBALL_FINI in fini, so a test can see
 * that fini ran (and, having unset it, that it did not run again).
 */
#include <delayq/handler.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int oddball_state;

static int oddball_init(const dq_host *host, const dq_settings *s, void **state,
                        char *err, size_t errlen)
{
    if (host->setting_bool(s, "refuse", 0)) {
        snprintf(err, errlen, "oddball: refused as asked");
        return -1;
    }
    (void)host->setting_int(s, "count", 1); /* error not checked, on purpose */
    *state = &oddball_state;
    return 0;
}

static dq_handler_result oddball_handle(void *state, const dq_handler_job *job,
                                        dq_handler_outcome *out)
{
    (void)state;
    const char *p = job->payload;
    if (strcmp(p, "odd") == 0)
        return (dq_handler_result)7;
    if (strcmp(p, "silent") == 0)
        return DQ_HANDLER_RETRY;
    if (strcmp(p, "lines") == 0) {
        snprintf(out->error, sizeof out->error, "first\nsecond\r\nthird");
        return DQ_HANDLER_FAIL;
    }
    if (strcmp(p, "late") == 0) {
        out->retry_delay_ms = -5;
        snprintf(out->error, sizeof out->error, "later");
        return DQ_HANDLER_RETRY;
    }
    return DQ_HANDLER_OK;
}

static void oddball_fini(void *state)
{
    if (state == &oddball_state)
        setenv("ODDBALL_FINI", "called", 1);
}

DQ_HANDLER_DEFINE("oddball", oddball_init, oddball_handle, oddball_fini);
