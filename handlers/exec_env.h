/*
 * The environment of the exec handler's program.  It does not inherit the
 * daemon's: a service's environment holds what the program has no business
 * seeing ($NOTIFY_SOCKET, an Environment= secret of a drop-in).  It gets
 * PATH (the daemon's, or a default), LANG (when the daemon has it), the
 * variables the settings name:
 *
 *   env = ["HOME", "TZ"];              # passed through from the daemon
 *   setenv = { DB_URL = "..."; };      # set
 *
 * and the job's DELAYQ_* variables, which nothing may override.  All but
 * the job's variables are fixed at init.
 */
#ifndef DQ_EXEC_ENV_H
#define DQ_EXEC_ENV_H

#include <delayq/handler.h>
#include <stddef.h>

/* The PATH a program gets when the daemon has none (systemd's default for
 * services). */
#define EXEC_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct exec_env {
    char **vars;        /* NULL-terminated "NAME=VALUE": nfixed owned
                           strings, then the job's, which point into jobbuf */
    size_t nfixed;
    char *jobbuf;       /* the job's variables, reused from job to job */
    size_t jobcap;
    int has_fence;      /* the daemon hands over the job's fence */
};

/*
 * Read `env` and `setenv` from the settings and build the fixed part.
 * Returns 0, or -1 with a one-line reason in err ("FILE:LINE: PATH: WHY"
 * when the host can locate the setting); ee is then empty, and
 * exec_env_free is harmless.
 */
int exec_env_init(struct exec_env *ee, const dq_host *host, const dq_settings *s,
                  char *err, size_t errlen);

/*
 * The environment for one job: the fixed part and the job's variables.
 * Valid until the next call or exec_env_free.  NULL when out of memory
 * (only when the job's names outgrow every earlier job's).
 */
char *const *exec_env_for_job(struct exec_env *ee, const dq_handler_job *job);

void exec_env_free(struct exec_env *ee);

#endif
