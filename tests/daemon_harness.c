#include "daemon_harness.h"

#include <check.h>
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- time ---------------------------------------------------------------- */

int64_t h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t h_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void h_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int h_wait(int timeout_ms, int (*cond)(void *arg), void *arg)
{
    int64_t deadline = h_mono_ms() + timeout_ms;
    for (;;) {
        int v = cond(arg);
        if (v || h_mono_ms() >= deadline)
            return v;
        h_sleep_ms(10);
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
    char text[8192];
    snprintf(text, sizeof text,
             "redis = { unix_socket = \"%s\"; };\n"
             "handler_dir = \"%s\";\n"
             "queues = ( { name = \"" H_QUEUE "\"; workers = %d; lease = \"%s\"; batch = %d;\n"
             "             max_attempts = %d;\n"
             "             backoff = { base = \"%s\"; cap = \"%s\"; jitter = %.2f; }; } );\n"
             "handlers = ( %s );\n"
             "reaper = { interval = \"%s\"; batch = 100; };\n"
             "shutdown_timeout = \"%s\";\n"
             "log = { level = \"%s\"; target = \"stderr\"; };\n",
             h->fx.sock, h->handler_dir, hc->workers, hc->lease, hc->batch,
             hc->max_attempts, hc->backoff_base, hc->backoff_cap, hc->jitter, hs,
             hc->reaper_interval, hc->shutdown_timeout, hc->log_level);
    h_write_file(h->conf, text);
}

/* ---- Redis helpers --------------------------------------------------------- */

/* CLIENT LIST lines that contain `needle`; -1 when Redis cannot be asked. */
static int clients_with(const struct harness *h, const char *needle)
{
    struct timeval tv = { 2, 0 };
    redisContext *rc = redisConnectUnixWithTimeout(h->fx.sock, tv);
    if (!rc || rc->err) {
        if (rc)
            redisFree(rc);
        return -1;
    }
    int n = -1;
    redisReply *r = redisCommand(rc, "CLIENT LIST");
    if (r && r->type == REDIS_REPLY_STRING) {
        n = 0;
        for (const char *p = r->str; (p = strstr(p, needle)) != NULL; p++)
            n++;
    }
    if (r)
        freeReplyObject(r);
    redisFree(rc);
    return n;
}

struct ready_arg {
    struct harness *h;
    int workers;
};

/* Each worker has a subscribed connection and a command connection that
 * has claimed once; the reaper's has reaped once. */
static int daemon_ready(void *arg)
{
    struct ready_arg *a = arg;
    int status;
    if (waitpid(a->h->pid, &status, WNOHANG) == a->h->pid) {
        a->h->pid = 0;
        return -1;
    }
    return clients_with(a->h, "cmd=subscribe") >= a->workers
           && clients_with(a->h, "cmd=evalsha") >= a->workers + 1;
}

/* In a child about to run delayqd: no cores from workers a test kills or
 * crashes on purpose, and none of the test's descriptors (its Redis
 * connection) beyond 0, 1 and 2. */
static void prepare_exec(void)
{
    struct rlimit rl = { 0, 0 };
    setrlimit(RLIMIT_CORE, &rl);
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 1024); fd++)
        close(fd);
}

void h_start(struct harness *h, int workers)
{
    ck_assert_msg(h->pid == 0, "the daemon runs already");
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        int null = open("/dev/null", O_RDWR);
        if (fd < 0 || null < 0)
            _exit(127);
        dup2(null, 0);
        dup2(null, 1);
        dup2(fd, 2);
        prepare_exec();
        const char *prog = fixture_build_path("delayqd");
        execl(prog, prog, "-f", "-c", h->conf, (char *)NULL);
        _exit(127);
    }
    h->pid = pid;
    struct ready_arg a = { h, workers };
    int ok = h_wait(10000, daemon_ready, &a);
    ck_assert_msg(ok == 1, "delayqd did not get ready (%s); its log:\n%s",
                  ok < 0 ? "it exited" : "timeout", h_log_tail(h));
}

/* From /proc/PID/stat: the state, the parent and the start time (clock
 * ticks after boot, which with the pid names one process for good).
 * Returns 0, or -1 when there is no such process. */
static int proc_stat(pid_t pid, char *state, pid_t *ppid, unsigned long long *start)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t len = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    /* "pid (comm) S ppid ...": comm may hold spaces, so from the last ')';
     * the start time is the 22nd field. */
    const char *p = strrchr(buf, ')');
    int parent;
    if (!p || sscanf(p + 1, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
                     "%*d %*d %*d %*d %llu", state, &parent, start) != 3)
        return -1;
    *ppid = parent;
    return 0;
}

size_t h_children(pid_t parent, pid_t *pids, size_t max)
{
    size_t n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(e->d_name), ppid;
        char state;
        unsigned long long start;
        if (proc_stat(pid, &state, &ppid, &start) == 0 && ppid == parent && state != 'Z')
            pids[n++] = pid;
    }
    closedir(d);
    return n;
}

int h_stop(struct harness *h, int timeout_ms)
{
    if (h->pid <= 0)
        return -1;
    enum { MAX_KIDS = 600 };
    pid_t kids[MAX_KIDS];
    unsigned long long started[MAX_KIDS];
    size_t nkids = h_children(h->pid, kids, MAX_KIDS);
    for (size_t i = 0; i < nkids; i++) {
        char state;
        pid_t ppid;
        if (proc_stat(kids[i], &state, &ppid, &started[i]) < 0)
            started[i] = 0;
    }
    kill(h->pid, SIGTERM);
    int status = -1;
    int64_t deadline = h_mono_ms() + timeout_ms;
    for (;;) {
        pid_t w = waitpid(h->pid, &status, WNOHANG);
        if (w == h->pid)
            break;
        if (h_mono_ms() >= deadline) {
            kill(h->pid, SIGKILL);
            waitpid(h->pid, NULL, 0);
            status = -1;
            break;
        }
        h_sleep_ms(5);
    }
    /* Children it did not stop (a worker stuck in a handler ignores the
     * SIGTERM its parent's death sends): none may outlive the test.  The
     * start time makes sure the pid is still that child. */
    for (size_t i = 0; i < nkids; i++) {
        char state;
        pid_t ppid;
        unsigned long long start;
        if (started[i] && proc_stat(kids[i], &state, &ppid, &start) == 0
            && start == started[i])
            kill(kids[i], SIGKILL);
    }
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
        prepare_exec();
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    int64_t deadline = h_mono_ms() + 10000;
    int timed_out = 0;
    for (;;) {
        int left = (int)(deadline - h_mono_ms());
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
        long long ms;
        int pid;
        if (sscanf(line, "%256s %d %d %15s %lld", r.id, &r.attempt, &pid, what, &ms) != 5)
            continue;
        r.pid = pid;
        r.ms = ms;
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

void h_enqueue_spread(struct harness *h, const char *prefix, int n, int64_t base,
                      int64_t spread_ms, const char *(*payload_of)(int i))
{
    enum { CHUNK = 1000 };
    static dq_enqueue_req reqs[CHUNK];
    static char ids[CHUNK][32];
    for (int i = 0; i < n; i += CHUNK) {
        int k = n - i < CHUNK ? n - i : CHUNK;
        for (int j = 0; j < k; j++) {
            snprintf(ids[j], sizeof ids[j], "%.16s%d", prefix, i + j);
            const char *payload = payload_of(i + j);
            reqs[j] = (dq_enqueue_req){ .queue = H_QUEUE, .type = "t", .id = ids[j],
                                        .payload = payload, .payload_len = strlen(payload),
                                        .at_ms = base + (int64_t)(i + j) * spread_ms / n };
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

/* ---- HTTP ------------------------------------------------------------------ */

int h_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

int h_http_get(int port, const char *path, char *body, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct timeval tv = { 10, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    body[0] = '\0';
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    char req[128];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\n\r\n", path);
    static char raw[262144];
    size_t got = 0;
    ssize_t k;
    if (write(fd, req, (size_t)n) == n)
        while (got < sizeof raw - 1 && (k = read(fd, raw + got, sizeof raw - 1 - got)) > 0)
            got += (size_t)k;
    close(fd);
    raw[got] = '\0';
    int status = -1;
    if (sscanf(raw, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    const char *b = strstr(raw, "\r\n\r\n");
    snprintf(body, len, "%s", b ? b + 4 : "");
    return status;
}
