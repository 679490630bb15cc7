#include "config.h"

#include "testutil.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- time ---------------------------------------------------------------- */

int64_t tu_clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t tu_now_ms(void)
{
    return tu_clock_us(CLOCK_REALTIME) / 1000;
}

int64_t tu_mono_ms(void)
{
    return tu_clock_us(CLOCK_MONOTONIC) / 1000;
}

void tu_sleep_ms(int64_t ms)
{
    if (ms <= 0)
        return;
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- processes ------------------------------------------------------------- */

/* "pid (comm) S ppid ...": comm may hold spaces and parentheses, so the
 * fields are counted from the last ')'.  After it come state (3), ppid (4),
 * ... utime (14), stime (15), cutime (16), cstime (17), ... starttime (22). */
int tu_proc_stat(pid_t pid, struct tu_proc_stat *ps)
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
    const char *p = strrchr(buf, ')');
    const char *open = strchr(buf, '(');
    if (!p || !open)
        return -1;
    snprintf(ps->comm, sizeof ps->comm, "%.*s", (int)(p - open - 1), open + 1);
    int ppid;
    unsigned long long ut, st;
    long long cut, cst;
    if (sscanf(p + 1, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld "
                     "%*d %*d %*d %*d %llu", &ps->state, &ppid, &ut, &st, &cut, &cst,
                     &ps->start) != 7)
        return -1;
    ps->pid = pid;
    ps->ppid = (pid_t)ppid;
    ps->utime = (int64_t)ut;
    ps->stime = (int64_t)st;
    ps->cutime = cut;
    ps->cstime = cst;
    return 0;
}

int tu_proc_each(int (*fn)(const struct tu_proc_stat *ps, void *arg), void *arg)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -1;
    struct dirent *e;
    struct tu_proc_stat ps;
    while ((e = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]))
            continue;
        if (tu_proc_stat((pid_t)atoi(e->d_name), &ps) == 0 && fn(&ps, arg))
            break;
    }
    closedir(d);
    return 0;
}

#define ADMIN_COMM "delayqd-admin"

struct children_arg {
    pid_t parent;
    pid_t *pids;
    unsigned long long *start;
    size_t n, max;
    int with_admin;
};

static int add_child(const struct tu_proc_stat *ps, void *arg)
{
    struct children_arg *a = arg;
    if (ps->ppid == a->parent && ps->state != 'Z'
        && (a->with_admin || strcmp(ps->comm, ADMIN_COMM) != 0)) {
        if (a->start)
            a->start[a->n] = ps->start;
        a->pids[a->n++] = ps->pid;
    }
    return a->n == a->max;
}

static size_t children_of(pid_t parent, pid_t *pids, unsigned long long *start, size_t max,
                          int with_admin)
{
    struct children_arg a = { parent, pids, start, 0, max, with_admin };
    if (max > 0)
        tu_proc_each(add_child, &a);
    return a.n;
}

size_t tu_children(pid_t parent, pid_t *pids, unsigned long long *start, size_t max)
{
    return children_of(parent, pids, start, max, 0);
}

struct admin_arg {
    pid_t parent, found;
};

static int find_admin(const struct tu_proc_stat *ps, void *arg)
{
    struct admin_arg *a = arg;
    if (ps->ppid == a->parent && ps->state != 'Z' && strcmp(ps->comm, ADMIN_COMM) == 0)
        a->found = ps->pid;
    return a->found != 0;
}

pid_t tu_admin_pid(pid_t parent)
{
    struct admin_arg a = { parent, 0 };
    tu_proc_each(find_admin, &a);
    return a.found;
}

int tu_process_running(pid_t pid)
{
    if (kill(pid, 0) < 0)
        return 0;
    struct tu_proc_stat ps;
    return tu_proc_stat(pid, &ps) < 0 || ps.state != 'Z';
}

int tu_stop_process(pid_t pid, int timeout_ms)
{
    if (pid <= 0)
        return -1;
    if (kill(pid, SIGTERM) < 0)
        return -1;      /* ESRCH: gone already, reaped by someone */
    int64_t deadline = tu_mono_ms() + timeout_ms;
    for (;;) {
        int status;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            return status;
        if (w < 0 && errno == ECHILD && !tu_process_running(pid))
            return -1;
        if (tu_mono_ms() >= deadline)
            break;
        tu_sleep_ms(5);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

int tu_stop_process_tree(pid_t pid, int timeout_ms)
{
    enum { MAX_KIDS = 600 };
    pid_t kids[MAX_KIDS];
    unsigned long long started[MAX_KIDS];
    size_t nkids = children_of(pid, kids, started, MAX_KIDS, 1);
    int status = tu_stop_process(pid, timeout_ms);
    /* A child stuck where it ignores the SIGTERM its parent's death sends
     * (a worker in a handler) must not outlive it either. */
    for (size_t i = 0; i < nkids; i++) {
        struct tu_proc_stat ps;
        if (tu_proc_stat(kids[i], &ps) == 0 && ps.start == started[i])
            kill(kids[i], SIGKILL);
    }
    return status;
}

void tu_child_prepare(int flags)
{
    if (flags & TU_DIE_WITH_PARENT)
        prctl(PR_SET_PDEATHSIG, SIGTERM);
    struct rlimit rl = { 0, 0 };
    setrlimit(RLIMIT_CORE, &rl);
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 1024); fd++)
        close(fd);
}

pid_t tu_spawn(char *const argv[], const char *log, int flags, char *err, size_t errlen)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid > 0)
        return pid;
    int null = open("/dev/null", O_RDWR);
    int fd = log ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0600) : 2;
    if (null < 0 || fd < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(fd, 2) < 0)
        _exit(127);
    tu_child_prepare(flags);
    execv(argv[0], argv);
    dprintf(2, "%s: cannot run it: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* ---- files ------------------------------------------------------------------ */

int tu_make_temp_dir(const char *prefix, char *dir, size_t dirlen, char *err, size_t errlen)
{
    const char *tmp = getenv("TMPDIR");
    int n = snprintf(dir, dirlen, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", prefix);
    if (n < 0 || (size_t)n >= dirlen) {
        snprintf(err, errlen, "%s: TMPDIR too long", tmp);
        dir[0] = '\0';
        return -1;
    }
    if (!mkdtemp(dir)) {
        snprintf(err, errlen, "mkdtemp %s: %s", dir, strerror(errno));
        dir[0] = '\0';
        return -1;
    }
    return 0;
}

int tu_copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "r");
    if (!in)
        return -1;
    FILE *out = fopen(to, "w");
    int rc = out ? 0 : -1;
    char buf[4096];
    size_t n;
    while (out && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n)
            rc = -1;
    if (out && fclose(out) != 0)
        rc = -1;
    fclose(in);
    return rc;
}

int tu_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
    /* A test may leave a directory it made unreadable or read-only. */
    if ((st.st_mode & S_IRWXU) != S_IRWXU && chmod(path, st.st_mode | S_IRWXU) < 0)
        return -1;
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *child;
        if (asprintf(&child, "%s/%s", path, e->d_name) < 0) {
            rc = -1;
            break;
        }
        if (tu_remove_tree(child) < 0)
            rc = -1;
        free(child);
    }
    closedir(d);
    return rmdir(path) < 0 ? -1 : rc;
}

/* ---- redis-server ---------------------------------------------------------- */

int tu_redis_find(const char *given, char *out, size_t outlen)
{
    if (given && *given) {
        snprintf(out, outlen, "%s", given);
        return access(out, X_OK) == 0 ? 0 : -1;
    }
    const char *env = getenv("REDIS_SERVER");
    if (env && *env && access(env, X_OK) == 0) {
        snprintf(out, outlen, "%s", env);
        return 0;
    }
    const char *path = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/bin:/usr/sbin:/usr/local/bin", path ? path : "");
    for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        snprintf(out, outlen, "%s/redis-server", d);
        if (access(out, X_OK) == 0)
            return 0;
    }
    return -1;
}

/* Wait until the server answers PING, or it exits, or 10 s pass. */
static int wait_for_ping(const char *sock, pid_t pid)
{
    int64_t deadline = tu_mono_ms() + 10000;
    while (tu_mono_ms() < deadline) {
        char err[256];
        redisContext *rc = tu_redis_connect(sock, 1000, err, sizeof err);
        if (rc) {
            redisReply *r = redisCommand(rc, "PING");
            int ok = r && r->type == REDIS_REPLY_STATUS;
            if (r)
                freeReplyObject(r);
            redisFree(rc);
            if (ok)
                return 0;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return 1;
        tu_sleep_ms(10);
    }
    return -1;
}

int tu_redis_spawn(const char *server, const char *dir, const char *sock, int flags,
                   pid_t *pid, char *err, size_t errlen)
{
    return tu_redis_spawn_with(server, dir, sock, NULL, flags, pid, err, errlen);
}

int tu_redis_spawn_with(const char *server, const char *dir, const char *sock,
                        char *const *extra, int flags, pid_t *pid, char *err, size_t errlen)
{
    *pid = 0;
    if (strlen(sock) >= sizeof ((struct sockaddr_un *)0)->sun_path) {
        snprintf(err, errlen, "%s: too long for a unix socket (set a shorter TMPDIR)", sock);
        return -1;
    }
    char log[4200];
    snprintf(log, sizeof log, "%s/redis.log", dir);
    char *argv[64] = {
        (char *)server, "--port", "0", "--unixsocket", (char *)sock,
        "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
        "--dir", (char *)dir, "--logfile", log, "--daemonize", "no", NULL
    };
    size_t n = 17;
    for (size_t i = 0; extra && extra[i] && n < sizeof argv / sizeof argv[0] - 1; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    pid_t child = tu_spawn(argv, NULL, flags, err, errlen);
    if (child < 0)
        return -1;
    int up = wait_for_ping(sock, child);
    if (up != 0) {
        if (up < 0)
            tu_stop_process(child, 5000);
        snprintf(err, errlen, "%s did not start (see its log %s)", server, log);
        return -1;
    }
    *pid = child;
    return 0;
}

/* ---- Redis commands ------------------------------------------------------------ */

redisContext *tu_redis_connect(const char *sock, int timeout_ms, char *err, size_t errlen)
{
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
    redisContext *rc = redisConnectUnixWithTimeout(sock, tv);
    if (!rc || rc->err) {
        snprintf(err, errlen, "cannot connect to %s: %s", sock,
                 rc ? rc->errstr : "out of memory");
        if (rc)
            redisFree(rc);
        return NULL;
    }
    if (redisSetTimeout(rc, tv) != REDIS_OK) {
        snprintf(err, errlen, "%s: cannot set a timeout", sock);
        redisFree(rc);
        return NULL;
    }
    return rc;
}

long long tu_redis_vint(redisContext *rc, const char *fmt, va_list ap)
{
    redisReply *r = redisvCommand(rc, fmt, ap);
    long long v = -1;
    if (r && r->type == REDIS_REPLY_INTEGER)
        v = r->integer;
    else if (r && r->type == REDIS_REPLY_ARRAY)
        v = (long long)r->elements;
    else if (r && r->type == REDIS_REPLY_STATUS)
        v = 0;
    if (r)
        freeReplyObject(r);
    return v;
}

long long tu_redis_vint_at(const char *sock, int timeout_ms, const char *fmt, va_list ap)
{
    char err[300];
    redisContext *rc = tu_redis_connect(sock, timeout_ms, err, sizeof err);
    if (!rc)
        return -1;
    long long v = tu_redis_vint(rc, fmt, ap);
    redisFree(rc);
    return v;
}

/* Whether nothing holds TCP port `port` of 127.0.0.1 right now. */
static int port_bindable(int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
                             .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* The last ports this process gave: a test takes several before it binds
 * them, so a port given is not given again soon. */
static int given_ports[64];
static unsigned given_next;

static int port_given(int port)
{
    for (size_t i = 0; i < sizeof given_ports / sizeof given_ports[0]; i++)
        if (given_ports[i] == port)
            return 1;
    return 0;
}

static int port_give(int port)
{
    given_ports[given_next++ % (sizeof given_ports / sizeof given_ports[0])] = port;
    return port;
}

/* The lowest port of the kernel's ephemeral range (32768 when it cannot be
 * read). */
static int ephemeral_low(void)
{
    int lo = 32768, hi;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

/* A port is taken from below the kernel's ephemeral range: a port from
 * that range can become the local port of a connection any other test
 * opens between the probe and the bind (it did, to a daemon's admin
 * listener in CI).  Below it, only another test picking the same port can
 * take it.  The pick mixes the pid and the clock, so forked children do not
 * repeat their parent's picks. */
int tu_free_port(void)
{
    const int base = 15000;
    int lo = ephemeral_low();
    if (lo - base >= 1000) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t x = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec * 2654435761u;
        for (int tries = 0; tries < 200; tries++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            int port = base + (int)(x % (uint64_t)(lo - base));
            if (!port_given(port) && port_bindable(port))
                return port_give(port);
        }
    }
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0
        && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

long long tu_redis_int(redisContext *rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    long long v = tu_redis_vint(rc, fmt, ap);
    va_end(ap);
    return v;
}

int tu_redis_clients_with(redisContext *rc, const char *needle)
{
    redisReply *r = redisCommand(rc, "CLIENT LIST");
    int n = -1;
    if (r && r->type == REDIS_REPLY_STRING) {
        n = 0;
        for (const char *p = r->str; (p = strstr(p, needle)) != NULL; p++)
            n++;
    }
    if (r)
        freeReplyObject(r);
    return n;
}

int tu_delayqd_ready(redisContext *rc, int workers)
{
    /* Under durability "replicated" a write's last command is its WAIT. */
    return tu_redis_clients_with(rc, "cmd=subscribe") >= workers
           && tu_redis_clients_with(rc, "cmd=evalsha") + tu_redis_clients_with(rc, "cmd=wait")
              >= workers + 1;
}

pid_t tu_read_pid(const char *path, int timeout_ms)
{
    for (int waited = 0; waited < timeout_ms; waited += 20) {
        FILE *fp = fopen(path, "r");
        long v = 0;
        if (fp) {
            int ok = fscanf(fp, "%ld", &v) == 1;
            fclose(fp);
            if (ok && v > 0)
                return (pid_t)v;
        }
        tu_sleep_ms(20);
    }
    return 0;
}
