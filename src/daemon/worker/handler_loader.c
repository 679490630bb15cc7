#include "daemon/worker/handler_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/worker/settings.h"

/* DIR/FILE, or FILE when absolute; NULL with err set. */
static char *resolve(const char *dir, const char *file, char *err, size_t errlen)
{
    if (!file || !*file) {
        snprintf(err, errlen, "handler: no file given");
        return NULL;
    }
    if (file[0] != '/' && (!dir || !*dir)) {
        snprintf(err, errlen, "handler %s: a relative file needs a handler_dir", file);
        return NULL;
    }
    size_t dl = file[0] == '/' ? 0 : strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--;
    size_t n = dl + 1 + strlen(file) + 1;
    char *path = malloc(n);
    if (!path) {
        snprintf(err, errlen, "handler %s: out of memory", file);
        return NULL;
    }
    if (file[0] == '/')
        snprintf(path, n, "%s", file);
    else
        snprintf(path, n, "%.*s/%s", (int)dl, dir, file);
    return path;
}

/* Whether a file with these owner and mode bits is safe to run code from:
 * no one but root and us can change it. */
static int writable_by_others(const struct stat *st)
{
    return (st->st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

static int foreign_owner(const struct stat *st)
{
    return st->st_uid != 0 && st->st_uid != geteuid();
}

/* Check the directory that holds `file` (a path with a '/'). */
static int check_dir_of(const char *path, const char *file, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(file, '/');
    size_t n = slash ? (size_t)(slash - file) : 0;
    if (n >= sizeof dir) {
        snprintf(err, errlen, "handler %s: path too long", path);
        return -1;
    }
    if (n == 0)
        snprintf(dir, sizeof dir, "%s", slash ? "/" : ".");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)n, file);
    struct stat st;
    if (stat(dir, &st) < 0) {
        snprintf(err, errlen, "handler %s: %s: %s", path, dir, strerror(errno));
        return -1;
    }
    if (writable_by_others(&st)) {
        snprintf(err, errlen, "handler %s: refusing a file in a directory that "
                 "others can write to (%s, mode %04o)", path, dir,
                 (unsigned)(st.st_mode & 07777));
        return -1;
    }
    if (foreign_owner(&st)) {
        snprintf(err, errlen, "handler %s: refusing a file in a directory owned by "
                 "uid %u (%s; only root or uid %u may own it)", path,
                 (unsigned)st.st_uid, dir, (unsigned)geteuid());
        return -1;
    }
    return 0;
}

/*
 * The checks before dlopen: a handler runs with the daemon's privileges, so
 * refuse one that anybody else could have replaced.  Both the directory
 * named in the configuration and, through symlinks, the file's real
 * directory are checked.
 */
static int check_file(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        snprintf(err, errlen, "handler %s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "handler %s: not a regular file", path);
        return -1;
    }
    if (writable_by_others(&st)) {
        snprintf(err, errlen, "handler %s: refusing a file that others can write to "
                 "(mode %04o)", path, (unsigned)(st.st_mode & 07777));
        return -1;
    }
    if (foreign_owner(&st)) {
        snprintf(err, errlen, "handler %s: refusing a file owned by uid %u (only "
                 "root or uid %u may own it)", path, (unsigned)st.st_uid,
                 (unsigned)geteuid());
        return -1;
    }
    if (check_dir_of(path, path, err, errlen) < 0)
        return -1;
    char *real = realpath(path, NULL);
    if (!real) {
        snprintf(err, errlen, "handler %s: %s", path, strerror(errno));
        return -1;
    }
    int rc = strcmp(real, path) == 0 ? 0 : check_dir_of(path, real, err, errlen);
    free(real);
    return rc;
}

/* Find and check the descriptor in a freshly opened object. */
static const dq_handler *find_descriptor(void *dl, const char *path, char *err,
                                         size_t errlen)
{
    dlerror();
    const dq_handler *desc = dlsym(dl, DQ_HANDLER_SYMBOL);
    if (!desc) {
        snprintf(err, errlen, "handler %s: no symbol %s: not a delayq handler, or "
                 "built for another ABI", path, DQ_HANDLER_SYMBOL);
        return NULL;
    }
    if (desc->abi_version != DQ_HANDLER_ABI_VERSION) {
        snprintf(err, errlen, "handler %s: built for handler ABI %d, but this "
                 "delayqd runs ABI %d handlers", path, desc->abi_version,
                 DQ_HANDLER_ABI_VERSION);
        return NULL;
    }
    if (!desc->handle) {
        snprintf(err, errlen, "handler %s: its descriptor has no handle function",
                 path);
        return NULL;
    }
    return desc;
}

int handler_load(struct loaded_handler *h, const char *dir, const char *file,
                 char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    h->path = resolve(dir, file, err, errlen);
    if (!h->path)
        return -1;
    if (check_file(h->path, err, errlen) < 0)
        goto fail;
    dlerror();
    h->dl = dlopen(h->path, RTLD_NOW | RTLD_LOCAL);
    if (!h->dl) {
        const char *why = dlerror();
        snprintf(err, errlen, "handler %s: cannot load: %s", h->path,
                 why ? why : "unknown error");
        goto fail;
    }
    h->desc = find_descriptor(h->dl, h->path, err, errlen);
    if (!h->desc)
        goto fail;
    return 0;
fail:
    handler_unload(h);
    return -1;
}

const char *handler_name(const struct loaded_handler *h)
{
    if (h->desc && h->desc->name && *h->desc->name)
        return h->desc->name;
    return h->path ? h->path : "(none)";
}

int handler_init(struct loaded_handler *h, const dq_host *host,
                 const dq_settings *s, char *err, size_t errlen)
{
    if (!h->desc) {
        snprintf(err, errlen, "handler %s: not loaded", h->path ? h->path : "(none)");
        return -1;
    }
    if (h->initialized) {
        snprintf(err, errlen, "handler %s: initialised twice", h->path);
        return -1;
    }
    void *state = NULL;
    if (h->desc->init) {
        char why[512] = "";
        if (h->desc->init(host, s, &state, why, sizeof why) != 0) {
            why[sizeof why - 1] = '\0';
            snprintf(err, errlen, "handler %s: %s", h->path,
                     why[0] ? why : "init failed without a reason");
            return -1;
        }
    }
    const char *bad = host && host->setting_error ? host->setting_error(s) : NULL;
    if (bad) {
        /* The handler missed it: its settings are not what the file says. */
        snprintf(err, errlen, "handler %s: %s", h->path, bad);
        if (h->desc->fini)
            h->desc->fini(state);
        return -1;
    }
    h->state = state;
    h->host = host;
    h->initialized = 1;
    char unread[400];
    if (host && host->log && s && settings_unread(s, unread, sizeof unread))
        host->log(DQ_LOG_WARN, "%s: not a setting that handler %s reads (ignored)",
                  unread, handler_name(h));
    return 0;
}

/* Keep the outcome's error one NUL-terminated line. */
static void one_line(char *s, size_t size)
{
    s[size - 1] = '\0';
    for (; *s; s++)
        if (*s == '\n' || *s == '\r')
            *s = ' ';
}

dq_handler_result handler_run(struct loaded_handler *h, const dq_handler_job *job,
                              dq_handler_outcome *out)
{
    out->retry_delay_ms = -1;
    out->error[0] = '\0';
    if (!h->desc || !h->initialized) {
        snprintf(out->error, sizeof out->error, "handler %s is not initialised",
                 handler_name(h));
        return DQ_HANDLER_FAIL;
    }
    int code = (int)h->desc->handle(h->state, job, out);
    one_line(out->error, sizeof out->error);
    switch (code) {
    case DQ_HANDLER_OK:
        out->retry_delay_ms = -1;
        return DQ_HANDLER_OK;
    case DQ_HANDLER_RETRY:
        if (out->retry_delay_ms < -1)
            out->retry_delay_ms = -1;
        break;
    case DQ_HANDLER_FAIL:
        break;
    default:
        snprintf(out->error, sizeof out->error, "handler %s returned %d, which is "
                 "not OK, RETRY or FAIL", handler_name(h), code);
        return DQ_HANDLER_FAIL;
    }
    if (!out->error[0])
        snprintf(out->error, sizeof out->error, "handler %s gave no reason",
                 handler_name(h));
    return (dq_handler_result)code;
}

void handler_fini(struct loaded_handler *h)
{
    if (h->initialized && h->desc && h->desc->fini)
        h->desc->fini(h->state);
    h->initialized = 0;
    h->state = NULL;
    h->host = NULL;
}

void handler_unload(struct loaded_handler *h)
{
    handler_fini(h);
    if (h->dl)
        dlclose(h->dl);
    free(h->path);
    memset(h, 0, sizeof *h);
}
