/* Running the built delayq for the tests (cli_run.h). */
#include "cli_run.h"

#include <check.h>
#include <stdarg.h>
#include <string.h>

#include "fixture.h"

#define MAX_ARGS 32

/* Two variables unset, then the run's own. */
_Static_assert(CLI_RUN_ENV_MAX + 2 <= RUN_ENV_MAX, "run_opts.env is too small");

static const char *socket_path;

void cli_run_socket(const char *sock)
{
    socket_path = sock;
}

struct run_result *run_cli_how(const struct cli_run *how, ...)
{
    static struct run_result r;
    char *argv[MAX_ARGS];
    int argc = 0;
    argv[argc++] = (char *)fixture_build_path("delayq");
    if (!how->no_socket) {
        ck_assert_ptr_nonnull(socket_path);
        argv[argc++] = "-s";
        argv[argc++] = (char *)socket_path;
    }
    va_list ap;
    va_start(ap, how);
    for (const char *a; (a = va_arg(ap, const char *)) && argc < MAX_ARGS - 1;)
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    /* The user's own variables must not reach the program under test. */
    struct run_opts o = { .in = how->in, .in_len = how->in_len,
                          .env = { "DELAYQ_PASSWORD", "DELAYQ_PASSWORD_FILE" } };
    for (int i = 0; i < CLI_RUN_ENV_MAX && how->env[i]; i++)
        o.env[i + 2] = how->env[i];
    run_prog(&o, argv, &r);
    return &r;
}

void assert_ok(const struct run_result *r)
{
    ck_assert_msg(r->status == 0, "exit %d, stderr: %s", r->status, r->err);
    ck_assert_str_eq(r->err, "");
}

void assert_fails(const struct run_result *r, int status, const char *phrase)
{
    ck_assert_msg(r->status == status, "exit %d, want %d; stderr: %s", r->status,
                  status, r->err);
    ck_assert_msg(strncmp(r->err, "delayq: ", 8) == 0, "stderr: %s", r->err);
    const char *nl = strchr(r->err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "not one line: '%s'", r->err);
    ck_assert_msg(strstr(r->err, phrase), "'%s' does not say '%s'", r->err, phrase);
}

void add_id(const struct run_result *r, char *id, size_t len)
{
    assert_ok(r);
    size_t n = strcspn(r->out, "\n");
    ck_assert_msg(n > 0 && r->out[n] == '\n' && r->out[n + 1] == '\0', "out: '%s'", r->out);
    ck_assert_uint_lt(n, len);
    memcpy(id, r->out, n);
    id[n] = '\0';
}
