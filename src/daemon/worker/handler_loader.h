/*
 * Loading handler plugins (include/delayq/handler.h) and running jobs
 * through them.
 *
 * One struct loaded_handler per job type: it holds its own reference to the
 * shared object and its own state, so the same file can serve several types
 * with different settings.  Loading a file twice is cheap: dlopen counts
 * references and maps it once, so a caller that maps N types to exec.so
 * simply calls handler_load N times; each handler_unload drops one
 * reference, and the object is unmapped with the last.
 *
 *   handler_load    check the file, dlopen it, find and check its descriptor
 *   handler_init    the handler's init with its settings (once per worker)
 *   handler_run     one job
 *   handler_fini    the handler's fini (a config check: init, then fini)
 *   handler_unload  fini if still needed, then dlclose
 */
#ifndef DQ_HANDLER_LOADER_H
#define DQ_HANDLER_LOADER_H

#include <delayq/handler.h>
#include <stddef.h>

struct loaded_handler {
    char *path;                 /* as resolved: DIR/FILE or FILE if absolute */
    void *dl;                   /* from dlopen, one reference */
    const dq_handler *desc;     /* inside the object; NULL before load */
    void *state;                /* what init made, for handle and fini */
    const dq_host *host;        /* borrowed from init until fini */
    int initialized;            /* init succeeded (or there is none) */
};

/*
 * Load `file`, relative to `dir` unless it is absolute (`dir` may be NULL
 * then), into `h` (which it zeroes first).  Refuses, with one line
 * "handler PATH: ..." in err:
 *   a missing or non-regular file;
 *   a file, or its directory, that group or others can write to, or that is
 *   owned by someone other than root or this process's effective user (a
 *   handler runs with the daemon's privileges);
 *   a file dlopen rejects (dlerror()'s text is in the message);
 *   an object without the DQ_HANDLER_SYMBOL descriptor, or whose descriptor
 *   has another abi_version or no handle function.
 * Returns 0, or -1 with `h` owning nothing.  Not thread-safe (dlerror).
 */
int handler_load(struct loaded_handler *h, const char *dir, const char *file,
                 char *err, size_t errlen) __attribute__((warn_unused_result));

/*
 * Run the handler's init with `host` and `s`, both borrowed until fini
 * returns.  A handler that returns 0 although an accessor recorded a
 * settings problem is failed anyway (after its fini) with that problem.
 * Returns 0, or -1 with "handler PATH: REASON" in err.
 */
int handler_init(struct loaded_handler *h, const dq_host *host,
                 const dq_settings *s, char *err, size_t errlen)
    __attribute__((warn_unused_result));

/*
 * Run one job.  Presets out->retry_delay_ms = -1 and out->error = "", so a
 * handler need only fill what it knows; a result outside the enum becomes
 * FAIL with an error saying so, and a RETRY or FAIL without a reason gets
 * one.  `h` must have been initialised.
 */
dq_handler_result handler_run(struct loaded_handler *h, const dq_handler_job *job,
                              dq_handler_outcome *out);

/* The handler's fini, if init succeeded; state is forgotten.  Idempotent. */
void handler_fini(struct loaded_handler *h);

/* handler_fini, then drop the reference to the object and free the path;
 * `h` owns nothing afterwards.  Safe on a zeroed or failed handler. */
void handler_unload(struct loaded_handler *h);

/* The descriptor's name, or the path when it has none: for logs. */
const char *handler_name(const struct loaded_handler *h);

#endif
