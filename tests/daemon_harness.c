#include "daemon_harness.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- waiting ---------------------------------------------------------------- */

int h_wait(int timeout_ms, int (*cond)(void *arg), void *arg)
{
    int64_t deadline = tu_mono_ms() + timeout_ms;
    for (;;) {
        int v = cond(arg);
        if (v || tu_mono_ms() >= deadline)
            return v;
        tu_sleep_ms(10);
    }
}

/* ---- set-up -------------------------------------------------------------- */

void h_conf_defaults(struct h_conf *hc)
{
    memset(hc, 0, sizeof *hc);
    hc->workers = 2;
    hc->lease = "3s";
    hc->batch = 8;
    hc->max_attempts = 5;
    hc->backoff_base = "100ms";
    hc->backoff_cap = "1s";
    hc->jitter = 0;
    hc->reaper_interval = "200ms";
    hc->shutdown_timeout = "10s";
    hc->log_level = "info";
}

void h_setup(struct harness *h)
{
    memset(h, 0, sizeof *h);
    /* A client writing to a restarted server gets EPIPE, not a signal. */
    signal(SIGPIPE, SIG_IGN);
    fixture_redis_start(&h->fx);
    h->c = fixture_client(&h->fx);
    snprintf(h->conf, sizeof h->conf, "%s/delayqd.conf", h->fx.dir);
    snprintf(h->log, sizeof h->log, "%s/delayqd.log", h->fx.dir);
    snprintf(h->record, sizeof h->record, "%s/record.log", h->fx.dir);
    /* The handlers' directory: absolute, and it and the plugins writable
     * by us only (whatever the umask was at build time), since delayqd
     * refuses a handler that others could replace. */
    const char *dir = fixture_build_path("tests/plugins/.libs");
    char real[PATH_MAX];
    ck_assert_msg(realpath(dir, real) != NULL, "%s: %s (is the test handler built?)", dir,
                  strerror(errno));
    snprintf(h->handler_dir, sizeof h->handler_dir, "%s", real);
    static const char *const files[] = { ".", "testhandler.so", "noabi.so", "wrongabi.so" };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[PATH_MAX + 32];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", real, files[i]);
        if (stat(path, &st) == 0 && (st.st_mode & 022))
            chmod(path, st.st_mode & 0755);
    }
}

void h_teardown(struct harness *h)
{
    if (h->pid > 0)
        h_stop(h, 5000);
    /* In a sanitizer build, a report from the daemon or a worker fails the
     * test even when the process it killed was restarted. */
    int reports = h_log_count(h, "Sanitizer") + h_log_count(h, "runtime error:");
    const char *tail = h_log_tail(h);     /* before DIR goes */
    dq_close(h->c);
    h->c = NULL;
    fixture_redis_stop(&h->fx);
    ck_assert_msg(reports == 0, "sanitizer report in the daemon's log:\n%s", tail);
}

const char *h_handler(const struct harness *h, char *buf, size_t len, const char *type,
                      const char *timeout, int max_attempts)
{
    char attempts[64] = "";
    if (max_attempts > 0)
        snprintf(attempts, sizeof attempts, " max_attempts = %d;", max_attempts);
    snprintf(buf, len,
             "{ type = \"%s\"; file = \"testhandler.so\"; timeout = \"%s\";%s\n"
             "  settings = { record = \"%s\"; }; }",
             type, timeout, attempts, h->record);
    return buf;
}

const char *h_exec_sleeper(const struct harness *h, char *buf, size_t len,
                           const char *timeout, char *sh_pid, char *bg_pid)
{
    const char *top = getenv("TOP_BUILDDIR");
    char script[2 * PATH_MAX + 100];
    snprintf(sh_pid, PATH_MAX, "%s/sh.pid", h->fx.dir);
    snprintf(bg_pid, PATH_MAX, "%s/bg.pid", h->fx.dir);
    snprintf(script, sizeof script, "sleep 60 & echo $! > %s; echo $$ > %s; wait", bg_pid,
             sh_pid);
    snprintf(buf, len,
             "{ type = \"*\"; file = \"%s/handlers/.libs/exec.so\"; timeout = \"%s\";\n"
             "  settings = { argv = [\"/bin/sh\", \"-c\", \"%s\"]; }; }",
             top ? top : "..", timeout, script);
    return buf;
}

void h_write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    ck_assert_msg(fp != NULL, "%s: %s", path, strerror(errno));
    fputs(text, fp);
    ck_assert_int_eq(fclose(fp), 0);
}

void h_write_conf(const struct harness *h, const struct h_conf *hc)
{
    char handlers[1024];
    const char *hs = hc->handlers;
    if (!hs)
        hs = h_handler(h, handlers, sizeof handlers, "*", "1s", 0);
    char text[8192], redis[1024], parts[64] = "";
    if (hc->partitions > 0)
        snprintf(parts, sizeof parts, " partitions = %d;", hc->partitions);
    if (hc->redis)
        snprintf(redis, sizeof redis, "%s", hc->redis);
    else
        snprintf(redis, sizeof redis, "unix_socket = \"%s\";", h->fx.sock);
    snprintf(text, sizeof text,
             "redis = { %s };\n"
             "handler_dir = \"%s\";\n"
             "queues = ( { name = \"" H_QUEUE "\"; workers = %d; lease = \"%s\"; batch = %d;\n"
             "             max_attempts = %d;%s\n"
             "             backoff = { base = \"%s\"; cap = \"%s\"; jitter = %.2f; }; } );\n"
             "handlers = ( %s );\n"
             "reaper = { interval = \"%s\"; batch = 100; };\n"
             "shutdown_timeout = \"%s\";\n"
             "log = { level = \"%s\"; target = \"stderr\"; };\n%s",
             redis, h->handler_dir, hc->workers, hc->lease, hc->batch,
             hc->max_attempts, parts, hc->backoff_base, hc->backoff_cap, hc->jitter, hs,
             hc->reaper_interval, hc->shutdown_timeout, hc->log_level,
             hc->extra ? hc->extra : "");
    h_write_file(h->conf, text);
}

/* ---- Redis helpers --------------------------------------------------------- */

struct ready_arg {
    struct harness *h;
    int workers;
};

/* The daemon is in its steady state (tu_delayqd_ready); -1 when it
 * exited. */
static int daemon_ready(void *arg)
{
    struct ready_arg *a = arg;
    int status;
    if (waitpid(a->h->pid, &status, WNOHANG) == a->h->pid) {
        a->h->pid = 0;
        return -1;
    }
    char err[300];
    redisContext *rc = tu_redis_connect(a->h->fx.sock, 2000, err, sizeof err);
    if (!rc)
        return 0;
    int ready = tu_delayqd_ready(rc, a->workers);
    redisFree(rc);
    return ready;
}

void h_start(struct harness *h, int workers)
{
    ck_assert_msg(h->pid == 0, "the daemon runs already");
    char *const argv[] = { (char *)fixture_build_path("delayqd"), "-f", "-c", h->conf, NULL };
    char err[300];
    pid_t pid = tu_spawn(argv, h->log, 0, err, sizeof err);
    ck_assert_msg(pid > 0, "%s", err);
    h->pid = pid;
    struct ready_arg a = { h, workers };
    /* A sanitizer build starting 200 workers, four other tests beside it,
     * took over 10 s; only a failure waits the whole 30. */
    int ok = h_wait(30000, daemon_ready, &a);
    ck_assert_msg(ok == 1, "delayqd did not get ready (%s); its log:\n%s",
                  ok < 0 ? "it exited" : "timeout", h_log_tail(h));
}

int h_stop(struct harness *h, int timeout_ms)
{
    if (h->pid <= 0)
        return -1;
    int status = tu_stop_process_tree(h->pid, timeout_ms);
    h->pid = 0;
    return status;
}

int h_run_delayqd(const char *const *args, char *err, size_t errlen)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        const char *argv[16];
        size_t n = 0;
        argv[n++] = fixture_build_path("delayqd");
        for (size_t i = 0; args[i] && n < 15; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(fds[1], 2);
        close(fds[0]);
        tu_child_prepare(0);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    int64_t deadline = tu_mono_ms() + 10000;
    int timed_out = 0;
    for (;;) {
        int left = (int)(deadline - tu_mono_ms());
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        struct pollfd pfd = { fds[0], POLLIN, 0 };
        if (poll(&pfd, 1, left) <= 0)
            continue;
        char buf[512];
        ssize_t r = read(fds[0], buf, sizeof buf);
        if (r <= 0)
            break;
        size_t take = (size_t)r < errlen - 1 - used ? (size_t)r : errlen - 1 - used;
        memcpy(err + used, buf, take);
        used += take;
    }
    err[used] = '\0';
    close(fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    if (timed_out)
        return -1;
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* ---- the record file ------------------------------------------------------ */

size_t h_records(const struct harness *h, struct h_run **out)
{
    *out = NULL;
    FILE *fp = fopen(h->record, "r");
    if (!fp)
        return 0;
    size_t n = 0, cap = 0;
    struct h_run *v = NULL;
    char line[512];
    while (fgets(line, sizeof line, fp)) {
        struct h_run r;
        char what[16];
        long long ms, fence = -1;
        int pid;
        r.said[0] = '\0';
        if (sscanf(line, "%256s %d %d %15s %lld %lld %63s", r.id, &r.attempt, &pid, what, &ms,
                   &fence, r.said) < 5)
            continue;
        r.pid = pid;
        r.ms = ms;
        r.fence = fence;
        r.end = strcmp(what, "end") == 0 ? 1 : strcmp(what, "start") == 0 ? 0 : H_OVERLAP;
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            v = realloc(v, cap * sizeof *v);
            ck_assert(v != NULL);
        }
        v[n++] = r;
    }
    fclose(fp);
    *out = v;
    return n;
}

int h_starts(const struct harness *h)
{
    struct h_run *r;
    size_t n = h_records(h, &r);
    int starts = 0;
    for (size_t i = 0; i < n; i++)
        starts += r[i].end == 0;
    free(r);
    return starts;
}

int h_count(const struct h_run *r, size_t n, const char *id, int end, struct h_run *first)
{
    int count = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].end == end && strcmp(r[i].id, id) == 0) {
            if (count++ == 0 && first)
                *first = r[i];
        }
    return count;
}

struct record_arg {
    const struct harness *h;
    const char *id;
    int end, n, found;
};

static int record_seen(void *arg)
{
    struct record_arg *a = arg;
    struct h_run *r;
    size_t n = h_records(a->h, &r);
    a->found = h_count(r, n, a->id, a->end, NULL);
    free(r);
    return a->found >= a->n;
}

int h_wait_record(const struct harness *h, const char *id, int end, int n, int timeout_ms)
{
    struct record_arg a = { h, id, end, n, 0 };
    h_wait(timeout_ms, record_seen, &a);
    return a.found;
}

size_t h_busy_workers(const struct harness *h, pid_t *out, int *lines, size_t max)
{
    pid_t kids[64];
    size_t nk = tu_children(h->pid, kids, NULL, 64), n = 0;
    FILE *fp = fopen(h->record, "r");
    if (!fp)
        return 0;
    char line[512];
    /* The last 8 KB, without the partial line it starts in. */
    if (fseek(fp, -8192, SEEK_END) == 0 && !fgets(line, sizeof line, fp)) {
        fclose(fp);
        return 0;
    }
    while (fgets(line, sizeof line, fp)) {
        char id[64];
        int attempt, pid;
        if (sscanf(line, "%63s %d %d", id, &attempt, &pid) != 3)
            continue;
        int child = 0;
        for (size_t i = 0; i < nk; i++)
            child |= kids[i] == pid;
        size_t at = 0;
        while (at < n && out[at] != pid)
            at++;
        if (!child || (at == n && n == max))
            continue;
        if (at == n) {
            out[n++] = pid;
            if (lines)
                lines[at] = 0;
        }
        if (lines)
            lines[at]++;
    }
    fclose(fp);
    return n;
}

/* ---- the log --------------------------------------------------------------- */

int h_log_count(const struct harness *h, const char *needle)
{
    FILE *fp = fopen(h->log, "r");
    if (!fp)
        return 0;
    int n = 0;
    char line[2048];
    while (fgets(line, sizeof line, fp))
        n += strstr(line, needle) != NULL;
    fclose(fp);
    return n;
}

struct log_arg {
    const struct harness *h;
    const char *needle;
    int n, found;
};

static int log_seen(void *arg)
{
    struct log_arg *a = arg;
    a->found = h_log_count(a->h, a->needle);
    return a->found >= a->n;
}

int h_wait_log(const struct harness *h, const char *needle, int n, int timeout_ms)
{
    struct log_arg a = { h, needle, n, 0 };
    h_wait(timeout_ms, log_seen, &a);
    return a.found;
}

const char *h_log_tail(const struct harness *h)
{
    static char buf[3001];
    buf[0] = '\0';
    int fd = open(h->log, O_RDONLY);
    if (fd < 0)
        return "(no log)";
    off_t size = lseek(fd, 0, SEEK_END);
    off_t from = size > 3000 ? size - 3000 : 0;
    ssize_t n = pread(fd, buf, 3000, from);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

/* ---- jobs ---------------------------------------------------------------- */

int64_t h_enqueue(struct harness *h, const char *id, const char *type, const char *payload,
                  int64_t delay_ms, int max_attempts)
{
    dq_enqueue_req req = {
        .queue = H_QUEUE, .type = type ? type : "t", .id = id,
        .payload = payload, .payload_len = strlen(payload),
        .delay_ms = delay_ms, .max_attempts = max_attempts,
    };
    dq_enqueued out;
    dq_status st = dq_enqueue(h->c, &req, &out);
    ck_assert_msg(st == DQ_OK, "enqueue %s: %s", id ? id : "", dq_errmsg(h->c));
    return out.due_ms;
}

void h_enqueue_numbered(struct harness *h, int n, const char *prefix, h_job_fn job,
                        void *arg)
{
    enum { CHUNK = 1000 };
    static dq_enqueue_req reqs[CHUNK];
    static char ids[CHUNK][32];
    for (int i = 0; i < n; i += CHUNK) {
        int k = n - i < CHUNK ? n - i : CHUNK;
        for (int j = 0; j < k; j++) {
            const char *payload = "";
            int64_t at_ms = 0;
            job(i + j, arg, &payload, &at_ms);
            snprintf(ids[j], sizeof ids[j], "%s%d", prefix, i + j);
            reqs[j] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = ids[j],
                                        .payload = payload, .payload_len = strlen(payload),
                                        .at_ms = at_ms };
        }
        ck_assert_int_eq(dq_enqueue_many(h->c, reqs, (size_t)k, NULL, NULL), DQ_OK);
    }
}

int h_state(struct harness *h, const char *id, dq_job_info *info)
{
    dq_job_info local;
    dq_job_info *i = info ? info : &local;
    dq_status st = dq_show(h->c, H_QUEUE, id, i);
    if (st == DQ_ERR_NOTFOUND)
        return -1;
    ck_assert_msg(st == DQ_OK, "show %s: %s", id, dq_errmsg(h->c));
    int state = (int)i->state;
    if (!info)
        dq_job_info_free(&local);
    return state;
}

struct job_arg {
    struct harness *h;
    const char *id;
    int state;
};

static int job_in_state(void *arg)
{
    struct job_arg *a = arg;
    return h_state(a->h, a->id, NULL) == a->state;
}

int h_wait_gone(struct harness *h, const char *id, int timeout_ms)
{
    struct job_arg a = { h, id, -1 };
    return h_wait(timeout_ms, job_in_state, &a);
}

int h_wait_state(struct harness *h, const char *id, dq_state state, int timeout_ms)
{
    struct job_arg a = { h, id, (int)state };
    return h_wait(timeout_ms, job_in_state, &a);
}

static int queue_idle(void *arg)
{
    struct harness *h = arg;
    dq_stats st;
    if (dq_stats_get(h->c, H_QUEUE, &st) != DQ_OK)
        return 0;
    return st.delayed == 0 && st.due == 0 && st.processing == 0;
}

int h_wait_idle(struct harness *h, int timeout_ms)
{
    return h_wait(timeout_ms, queue_idle, h);
}

/* Both `delayqd -t` and `delayqd -f` refuse the configuration with exit 78
 * and one line that names FILE:LINE and contains `what`. */
void h_assert_refused(const struct harness *h, int line, const char *what)
{
    char want[400];
    snprintf(want, sizeof want, "%s:%d:", h->conf, line);
    const char *modes[] = { "-t", "-f" };
    for (int m = 0; m < 2; m++) {
        const char *args[] = { modes[m], "-c", h->conf, NULL };
        char err[4096];
        int rc = h_run_delayqd(args, err, sizeof err);
        ck_assert_msg(rc == 78, "%s: exit %d, stderr: %s", modes[m], rc, err);
        char *nl = strchr(err, '\n');
        ck_assert_msg(nl && nl[1] == '\0', "%s: not one line: %s", modes[m], err);
        ck_assert_msg(strstr(err, want) != NULL, "%s: no '%s' in: %s", modes[m], want, err);
        ck_assert_msg(strstr(err, what) != NULL, "%s: no '%s' in: %s", modes[m], what, err);
    }
}

pid_t h_log_pid(const struct harness *h, const char *role, const char *needle)
{
    FILE *f = fopen(h->log, "r");
    ck_assert_msg(f != NULL, "%s: cannot read the log", h->log);
    char tag[64], line[1024];
    snprintf(tag, sizeof tag, "[%s ", role);
    pid_t pid = 0;
    while (fgets(line, sizeof line, f)) {
        const char *at = strstr(line, tag);
        if (at && strstr(line, needle))
            pid = (pid_t)atoi(at + strlen(tag));
    }
    fclose(f);
    return pid;
}
