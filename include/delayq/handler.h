/*
 * The delayq handler ABI: how delayqd runs a job through a plugin.
 *
 * A handler is a shared object that exports exactly one symbol, the
 * descriptor DQ_HANDLER_SYMBOL ("dq_handler_v1" for ABI 1).  The ABI version
 * is both in the symbol's name and in the descriptor, so a handler built for
 * another ABI fails dlsym() cleanly and delayqd refuses it by name.  Build
 * one with:
 *
 *   cc -shared -fPIC -o myhandler.so myhandler.c $(pkg-config --cflags delayq-handler)
 *
 * and define the descriptor with DQ_HANDLER_DEFINE (see docs/handlers.md).
 *
 * Life cycle, in each worker process:
 *   init(host, settings, &state, err, errlen) once, after the worker starts;
 *   handle(state, job, outcome) for each job of the types mapped to it, one
 *   at a time; fini(state) when the worker stops.
 * init also runs, followed at once by fini and never by handle, to check
 * the configuration: in `delayqd -t`, in the supervisor when delayqd starts
 * (before any worker), and in the supervisor at every reload (SIGHUP), where
 * a failed init keeps the configuration in force.  So init must not take
 * anything that only one process may hold (a lock, a listening port), or
 * must give it back in fini.
 *
 * Ownership: everything the host passes (job, settings, host table) is
 * borrowed and valid only during the call, except `host` and `settings`,
 * which stay valid until fini returns, as do the strings the settings
 * accessors return.  A handler must not exit(), must not install signal
 * handlers, and must not keep the job's pointers after handle returns.  A
 * handler that overruns its configured timeout is killed with its worker
 * process, and the job is retried or buried.
 *
 * The process: a worker runs one job at a time, on one thread, with SIGPIPE
 * ignored (a write to a closed socket or pipe fails with EPIPE).  The same
 * shared object may serve several job types, each with its own init and
 * state, so keep per-type data in `state`, not in globals.
 *
 * ABI history:
 *   1  first version.  Host services added since, at the end of dq_host:
 *      setting_group_len, setting_group_item, setting_reject; job_size,
 *      with the job's fence at the end of dq_handler_job (DQ_JOB_HAS).
 * Bump DQ_HANDLER_ABI_VERSION (and the symbol name) on any incompatible
 * change to the structures or the calling convention below.  New host
 * services are added only at the end of dq_host, with host->size telling a
 * handler which ones exist.
 */
#ifndef DELAYQ_HANDLER_H
#define DELAYQ_HANDLER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DQ_HANDLER_ABI_VERSION 1
#define DQ_HANDLER_SYMBOL "dq_handler_v1"

/* What became of one attempt. */
typedef enum dq_handler_result {
    DQ_HANDLER_OK = 0,      /* done: the job is deleted */
    DQ_HANDLER_RETRY = 1,   /* try again later, unless attempts are used up */
    DQ_HANDLER_FAIL = 2     /* dead now: no more attempts */
} dq_handler_result;

/* The job, as the handler sees it.  All pointers are borrowed. */
typedef struct dq_handler_job {
    const char *queue;
    const char *id;
    const char *type;
    const void *payload;    /* opaque bytes, followed by a NUL for convenience */
    size_t payload_len;
    int attempt;            /* 1 on the first run */
    int max_attempts;       /* attempts allowed in all */
    int64_t due_ms;         /* Unix ms, Redis server clock */
    int64_t created_ms;
    const char *last_error; /* of the previous attempt, "" if none */

    /* Added after ABI 1's first release: check DQ_JOB_HAS before use. */

    /* This attempt's fence: the token its lease is held under in Redis, a
     * number that only grows in the job's queue (in each partition), so a
     * later attempt of a job always has a greater one.  Handed to the
     * systems the job writes to, it lets them refuse an attempt older
     * than one they have seen (docs/handlers.md, "Fences and idempotency
     * keys"). */
    int64_t fence;
} dq_handler_job;

/* Filled by handle() beyond its result. */
typedef struct dq_handler_outcome {
    /* With DQ_HANDLER_RETRY: wait this long before the retry, at most the
     * queue's backoff cap; -1 (preset) means the queue's backoff. */
    int64_t retry_delay_ms;
    /* With RETRY or FAIL: why, one line; kept as the job's last error. */
    char error[512];
} dq_handler_outcome;

/* The handler's settings group from the configuration, read through the
 * host's accessors, so a handler need not link libconfig. */
typedef struct dq_settings dq_settings;

enum dq_log_level { DQ_LOG_DEBUG, DQ_LOG_INFO, DQ_LOG_WARN, DQ_LOG_ERR };

/* Services the daemon offers a handler. */
typedef struct dq_host {
    size_t size;            /* sizeof(dq_host) of the daemon: check before
                               using a member added after ABI 1 */
    int abi_version;

    /* Settings: `name` is a key in the handler's settings group.  Each
     * returns `def` when the key is absent; a value of the wrong type is
     * reported by setting_error. */
    const char *(*setting_string)(const dq_settings *s, const char *name,
                                  const char *def);
    int64_t (*setting_int)(const dq_settings *s, const char *name, int64_t def);
    int (*setting_bool)(const dq_settings *s, const char *name, int def);
    /* A duration such as "500ms", "30s"; returns milliseconds. */
    int64_t (*setting_duration_ms)(const dq_settings *s, const char *name,
                                   int64_t def);
    /* A list of strings ("argv = ["a", "b"]"): the count, and each element
     * with setting_list_item (NULL past the end). */
    size_t (*setting_list_len)(const dq_settings *s, const char *name);
    const char *(*setting_list_item)(const dq_settings *s, const char *name,
                                     size_t i);
    /* The first problem met by the accessors above ("FILE:LINE: ..."), or
     * NULL.  init should fail with it. */
    const char *(*setting_error)(const dq_settings *s);

    /* Log one line through the daemon's log, tagged with the worker. */
    void (*log)(enum dq_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

    /* The handler's per-type timeout in ms (0: none).  A handler that waits
     * on the network should give up a little before it. */
    int64_t timeout_ms;

    /* Added after ABI 1's first release: check DQ_HOST_HAS before use. */

    /* A group of strings ("setenv = { KEY = "value"; }"): the count of its
     * members, and member i's name, with its value in *value.  The name is
     * NULL past the end, and *value NULL when it is not a string (which
     * setting_error then reports). */
    size_t (*setting_group_len)(const dq_settings *s, const char *name);
    const char *(*setting_group_item)(const dq_settings *s, const char *name,
                                      size_t i, const char **value);
    /* Refuse a value the handler read but cannot use: records "FILE:LINE:
     * PATH: WHY" for setting_error (unless a problem is recorded already),
     * where PATH is the setting `name`, or its element or member i unless i
     * is DQ_SETTING_WHOLE.  init should then fail with setting_error. */
    void (*setting_reject)(const dq_settings *s, const char *name, size_t i,
                           const char *why);

    /* sizeof(dq_handler_job) of the daemon: which of the job's members
     * added after ABI 1's first release it fills (DQ_JOB_HAS). */
    size_t job_size;

    /* Whether `job`, the one handle() is running, was cancelled
     * (`delayq cancel`, dq_cancel) since it started: 1 or 0.  It costs a
     * read of shared memory, so a handler that runs long can ask between
     * steps, or every few ms while it waits.  Once it is 1 the job has
     * ended in Redis (cancelled: not retried, not dead) and handle()'s
     * outcome is ignored: return soon.  A handler still running the
     * handler entry's cancel_grace (2 s by default) after the cancel
     * reached this host is stopped with its worker, as at its timeout.
     * Check DQ_HOST_HAS(host, cancelled) before use. */
    int (*cancelled)(const dq_handler_job *job);
} dq_host;

/* setting_reject's index for the setting as a whole. */
#define DQ_SETTING_WHOLE ((size_t)-1)

/* Whether the daemon's host table has `member` (one added after ABI 1's
 * first release): DQ_HOST_HAS(host, setting_reject). */
#define DQ_HOST_HAS(host, member)                                           \
    ((host)->size >= offsetof(dq_host, member) + sizeof (host)->member)

/* Whether the jobs the daemon hands over have `member` (one added after
 * ABI 1's first release): DQ_JOB_HAS(host, fence).  A daemon older than
 * the member passes a shorter structure, so reading it there would read
 * past its end. */
#define DQ_JOB_HAS(host, member)                                            \
    (DQ_HOST_HAS(host, job_size)                                            \
     && (host)->job_size >= offsetof(dq_handler_job, member)               \
                            + sizeof ((dq_handler_job *)0)->member)

/* The descriptor a handler exports. */
typedef struct dq_handler {
    int abi_version;        /* DQ_HANDLER_ABI_VERSION */
    const char *name;       /* short name, for logs */
    /* Prepare; return 0, or -1 with a one-line reason in err.  May be NULL. */
    int (*init)(const dq_host *host, const dq_settings *settings, void **state,
                char *err, size_t errlen);
    /* Run one job.  Required. */
    dq_handler_result (*handle)(void *state, const dq_handler_job *job,
                                dq_handler_outcome *out);
    /* Release what init took.  May be NULL. */
    void (*fini)(void *state);
} dq_handler;

/* Define the exported descriptor:
 *   DQ_HANDLER_DEFINE("log", log_init, log_handle, log_fini);          */
#ifdef __cplusplus
#define DQ_HANDLER_LINKAGE extern "C" /* a const is internal in C++ */
#else
#define DQ_HANDLER_LINKAGE
#endif
#define DQ_HANDLER_DEFINE(NAME, INIT, HANDLE, FINI)                         \
    DQ_HANDLER_LINKAGE __attribute__((visibility("default")))              \
    const dq_handler dq_handler_v1 =                                        \
        { DQ_HANDLER_ABI_VERSION, NAME, INIT, HANDLE, FINI }

#ifdef __cplusplus
}
#endif
#endif /* DELAYQ_HANDLER_H */
