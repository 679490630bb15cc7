#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1   /* setgroups, mkdtemp, nftw; config.h would say the same */
#endif

#include "pg_fixture.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define READY_MS 30000      /* wait for the first accepted connection */
#define STOP_MS 10000       /* fast shutdown, then SIGKILL */
#define MAX_CHILDREN 256    /* postmaster children we kill on a crash */

/* The environment initdb and postgres get: nothing of ours (PGDATA, LANG,
 * PGOPTIONS...) leaks in, and TZ=UTC spares initdb its time zone search. */
static char *const child_env[] = { "LC_ALL=C", "TZ=UTC", "PATH=/usr/bin:/bin", NULL };

/* ---- small helpers --------------------------------------------------------- */

/* One line into pg->why: libpq's and the server's messages end in (and may
 * hold) newlines. */
__attribute__((format(printf, 2, 3)))
static void set_why(struct pg_server *pg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pg->why, sizeof pg->why, fmt, ap);
    va_end(ap);
    for (char *p = pg->why; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = ' ';
    size_t n = strlen(pg->why);
    while (n > 0 && pg->why[n - 1] == ' ')
        pg->why[--n] = '\0';
}

static int64_t now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;       /* cannot happen with CLOCK_MONOTONIC */
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The last non-empty line of the log, for pg->why ("" if none). */
static void log_tail(const char *path, char *out, size_t len)
{
    char buf[2048];
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, -(long)(sizeof buf - 1), SEEK_END) < 0)
        rewind(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    const char *line = strrchr(buf, '\n');
    line = line ? line + 1 : buf;
    size_t m = strlen(line) < len ? strlen(line) : len - 1;
    memcpy(out, line, m);
    out[m] = '\0';
}

/* ---- processes ------------------------------------------------------------- */

/* The state letter of /proc/PID/stat (R, S, D, T, Z...), or 0 when there is
 * no such process. */
static char proc_state(pid_t pid, pid_t *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');   /* the command name may hold anything */
    char state = 0;
    int parent = 0;
    if (!p || sscanf(p + 1, " %c %d", &state, &parent) != 2)
        return 0;
    if (ppid)
        *ppid = parent;
    return state;
}

/* Alive: a zombie has let go of everything (shared memory included). */
static bool proc_running(pid_t pid)
{
    char s = proc_state(pid, NULL);
    return s != 0 && s != 'Z' && s != 'X';
}

/* Wait until pid is gone: reaped when it is our child, else (a server that
 * another process of the test started) no longer running.  0, or -1 after
 * ms. */
static int wait_exit(pid_t pid, int ms)
{
    int64_t deadline = now_ms() + ms;
    for (;;) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD && !proc_running(pid)))
            return 0;
        if (now_ms() >= deadline)
            return -1;
        sleep_ms(10);
    }
}

/* The children of pid, from /proc (their parent must be stopped, so that
 * the list stays true). */
static size_t children_of(pid_t pid, pid_t *kids, size_t max)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d)) != NULL) {
        pid_t k = (pid_t)atoi(e->d_name), parent = 0;
        if (k > 0 && proc_state(k, &parent) && parent == pid)
            kids[n++] = k;
    }
    closedir(d);
    return n;
}

/* SIGKILL the postmaster and its children, and wait for them all.  The
 * children must die too: while one holds the old shared memory a new
 * postmaster refuses to start.  Stopping the postmaster first means it
 * forks no child we miss, and its children's pids cannot be reused before
 * our SIGKILL (nobody reaps them while it is stopped). */
static void kill_hard(pid_t pid)
{
    if (pid <= 0)
        return;
    if (kill(pid, SIGSTOP) == 0) {
        int64_t deadline = now_ms() + 1000;
        while (proc_state(pid, NULL) != 'T' && proc_running(pid) && now_ms() < deadline)
            sleep_ms(1);
    }
    pid_t kids[MAX_CHILDREN];
    size_t n = children_of(pid, kids, MAX_CHILDREN);
    for (size_t i = 0; i < n; i++)
        if (kill(kids[i], SIGKILL) < 0 && errno != ESRCH)
            fprintf(stderr, "pg_fixture: kill %d: %s\n", (int)kids[i], strerror(errno));
    if (kill(pid, SIGKILL) < 0 && errno != ESRCH)
        fprintf(stderr, "pg_fixture: kill %d: %s\n", (int)pid, strerror(errno));
    if (wait_exit(pid, 5000) < 0)
        fprintf(stderr, "pg_fixture: postmaster %d survived SIGKILL\n", (int)pid);
    for (size_t i = 0; i < n; i++)
        if (wait_exit(kids[i], 5000) < 0)
            fprintf(stderr, "pg_fixture: postgres child %d survived SIGKILL\n", (int)kids[i]);
}

/* The postmaster that runs on our data directory: the pid in its
 * postmaster.pid when that process runs with the data directory as its
 * working directory (a stale file after a crash may name a reused pid),
 * else the one we started (pg->pid, maybe 0 or dead).  Needed because a
 * Check test that restarts the server does so in a fork: the runner's
 * pg->pid is then out of date. */
static pid_t server_pid(const struct pg_server *pg)
{
    char path[300], cwd[PATH_MAX], want[PATH_MAX];
    snprintf(path, sizeof path, "%s/postmaster.pid", pg->dir);
    FILE *f = fopen(path, "r");
    int pid = 0;
    if (!f)
        return pg->pid;
    if (fscanf(f, "%d", &pid) != 1)
        pid = 0;
    fclose(f);
    snprintf(path, sizeof path, "/proc/%d/cwd", pid);
    ssize_t n = pid > 0 ? readlink(path, cwd, sizeof cwd - 1) : -1;
    if (n < 0 || !realpath(pg->dir, want) || !proc_running(pid))
        return pg->pid;
    cwd[n] = '\0';
    return strcmp(cwd, want) == 0 ? (pid_t)pid : pg->pid;
}

/* Stop the server with sig (SIGINT: fast shutdown), SIGKILL it and its
 * children after ms.  Also reaps our own postmaster when a forked test
 * replaced it.  0 when it stopped of itself (or was not running: *was_running
 * says), -1 when it had to be killed. */
static int stop_server(struct pg_server *pg, int sig, int ms, bool *was_running)
{
    pid_t pid = server_pid(pg);
    int rc = 0;
    *was_running = pid > 0 && proc_running(pid);
    if (*was_running && kill(pid, sig) == 0 && wait_exit(pid, ms) < 0) {
        kill_hard(pid);
        rc = -1;
    }
    if (pid > 0 && !*was_running)
        (void)waitpid(pid, NULL, WNOHANG);   /* our zombie, or ECHILD */
    if (pg->pid > 0 && pg->pid != pid)
        (void)waitpid(pg->pid, NULL, WNOHANG);
    pg->pid = 0;
    return rc;
}

/* ---- spawning -------------------------------------------------------------- */

/* Become the server's user: supplementary groups first, the uid last. */
static int drop_privileges(const struct pg_server *pg)
{
    if (geteuid() != 0)
        return 0;
    if (setgroups(1, &pg->run_gid) < 0 || setgid(pg->run_gid) < 0 || setuid(pg->run_uid) < 0) {
        dprintf(2, "pg_fixture: cannot become uid %d: %s\n", (int)pg->run_uid, strerror(errno));
        return -1;
    }
    return 0;
}

/* The server dies with the process that ran pg_start (SIGQUIT: immediate
 * shutdown), even when no teardown runs: Check ends a failed test with
 * _exit and a timed-out one with SIGKILL.  Only when that process starts
 * it: a server restarted by a forked test must outlive the test, for the
 * runner's pg_stop.  Set after setuid, which clears it; if that process is
 * gone already, give up. */
static int die_with(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGQUIT) < 0) {
        dprintf(2, "pg_fixture: prctl: %s\n", strerror(errno));
        return -1;
    }
    return getppid() == parent ? 0 : -1;
}

/* In the forked child, before exec: default signal mask, stdin from
 * /dev/null, stdout and stderr to the log, no fd of the test's (its
 * connections must see EOF when the test closes them), a session of its
 * own (Check's killpg of a timed-out test must not SIGKILL the postmaster
 * alone: die_with stops it properly), "/" as working directory (nobody
 * may not reach ours), the server's user. */
static int child_prepare(const struct pg_server *pg, pid_t parent)
{
    sigset_t none;
    if (sigemptyset(&none) < 0 || sigprocmask(SIG_SETMASK, &none, NULL) < 0)
        return -1;
    int null = open("/dev/null", O_RDONLY);
    int log = open(pg->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (null < 0 || log < 0 || dup2(null, 0) < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0) {
        dprintf(2, "pg_fixture: %s: %s\n", pg->log, strerror(errno));
        return -1;
    }
    long max = sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 && max < 65536 ? max : 1024); fd++)
        (void)close(fd);    /* EBADF for most: nothing to check */
    if (setsid() < 0 || chdir("/") < 0) {
        dprintf(2, "pg_fixture: setsid/chdir: %s\n", strerror(errno));
        return -1;
    }
    if (drop_privileges(pg) < 0)
        return -1;
    return parent == pg->owner ? die_with(parent) : 0;
}

/* fork + exec argv (a full path) as pg's run user, output to pg->log.
 * The child's pid, or -1 (pg->why). */
static pid_t spawn(struct pg_server *pg, char *const argv[])
{
    fflush(NULL);       /* or the child's exit would write our buffers twice */
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        set_why(pg, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid > 0)
        return pid;
    if (child_prepare(pg, parent) == 0) {
        execve(argv[0], argv, child_env);
        dprintf(2, "pg_fixture: cannot run %s: %s\n", argv[0], strerror(errno));
    }
    _exit(127);
}

/* Whether uid/gid can reach path (search permission on it and every
 * directory above it), asked in a child that becomes that user: exact,
 * with ACLs and all.  1 yes, 0 no, -1 cannot tell. */
static int reachable_by(const struct pg_server *pg, const char *path)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0)
        _exit(drop_privileges(pg) == 0 && access(path, X_OK) == 0 ? 0 : 1);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Run initdb on pg->dir.  0, or 1 (pg->why): initdb's arguments are fixed,
 * so a failure says the machine cannot run it (no shared memory, ...). */
static int run_initdb(struct pg_server *pg)
{
    char *argv[] = { PG_FIXTURE_BINDIR "/initdb", "-D", pg->dir, "-U", pg->user,
                     "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync",
                     "--no-instructions", NULL };
    pid_t pid = spawn(pg, argv);
    if (pid < 0)
        return 1;
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            set_why(pg, "waitpid initdb: %s", strerror(errno));
            return 1;
        }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    char tail[200];
    log_tail(pg->log, tail, sizeof tail);
    set_why(pg, "initdb failed (status 0x%x), PostgreSQL cannot run here: %s", status, tail);
    return 1;
}

/* Wait until the server accepts connections.  0, or -1 (pg->why) when it
 * exits or READY_MS pass (then it is killed). */
static int wait_ready(struct pg_server *pg)
{
    int64_t deadline = now_ms() + READY_MS;
    for (;;) {
        PGPing ping = PQping(pg->conninfo);
        if (ping == PQPING_OK)
            return 0;
        bool exited = waitpid(pg->pid, NULL, WNOHANG) == pg->pid;
        if (exited || ping == PQPING_NO_ATTEMPT || now_ms() >= deadline) {
            char tail[200];
            log_tail(pg->log, tail, sizeof tail);
            set_why(pg, "postgres %s (see %s): %s",
                    exited ? "exited" : "accepts no connection in time", pg->log,
                    tail[0] ? tail : "(no output)");
            if (!exited)
                kill_hard(pg->pid);
            pg->pid = 0;
            return -1;
        }
        sleep_ms(10);
    }
}

/* ---- directories ----------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    if (remove(path) < 0 && errno != ENOENT)
        fprintf(stderr, "pg_fixture: cannot remove %s: %s\n", path, strerror(errno));
    return 0;   /* remove what we can */
}

static void remove_tree(const char *path)
{
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
        fprintf(stderr, "pg_fixture: cannot remove %s: %s\n", path, strerror(errno));
}

/* A directory the server owns, mode 0700 (initdb and postgres insist). */
static int make_owned_dir(struct pg_server *pg, const char *path, bool create)
{
    if (create && mkdir(path, 0700) < 0) {
        set_why(pg, "mkdir %s: %s", path, strerror(errno));
        return -1;
    }
    if (chmod(path, 0700) < 0 || (geteuid() == 0 && chown(path, pg->run_uid, pg->run_gid) < 0)) {
        set_why(pg, "chmod/chown %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* The user the server runs as: nobody when we are root (1 and pg->why when
 * there is no such user), else ourselves. */
static int pick_user(struct pg_server *pg)
{
    snprintf(pg->user, sizeof pg->user, "%s", PG_FIXTURE_USER);
    pg->run_uid = geteuid();
    pg->run_gid = getegid();
    if (pg->run_uid != 0)
        return 0;
    struct passwd *pw = getpwnam("nobody");
    if (!pw) {
        set_why(pg, "running as root and there is no user \"nobody\" to run PostgreSQL as");
        return 1;
    }
    pg->run_uid = pw->pw_uid;
    pg->run_gid = pw->pw_gid;
    return 0;
}

/* The socket directory, and the data directory: BASE/pg, or SOCKDIR/pg
 * when the server's user cannot reach BASE.  The log is BASE/pg.log either
 * way (we open it before giving up root). */
static int make_dirs(struct pg_server *pg, const char *base_dir)
{
    char base[PATH_MAX];
    if (!realpath(base_dir, base)) {
        set_why(pg, "%s: %s", base_dir, strerror(errno));
        return -1;
    }
    snprintf(pg->sockdir, sizeof pg->sockdir, "/tmp/dqpg.XXXXXX");
    if (!mkdtemp(pg->sockdir)) {
        set_why(pg, "mkdtemp %s: %s", pg->sockdir, strerror(errno));
        pg->sockdir[0] = '\0';
        return -1;
    }
    if (make_owned_dir(pg, pg->sockdir, false) < 0)
        return -1;
    int reach = geteuid() == 0 ? reachable_by(pg, base) : 1;
    const char *parent = reach == 1 ? base : pg->sockdir;
    if ((size_t)snprintf(pg->dir, sizeof pg->dir, "%s/pg", parent) >= sizeof pg->dir
        || (size_t)snprintf(pg->log, sizeof pg->log, "%s/pg.log", base) >= sizeof pg->log) {
        set_why(pg, "%s: too long a path for the data directory", base);
        return -1;
    }
    return make_owned_dir(pg, pg->dir, true);
}

/* ---- the API ----------------------------------------------------------------- */

/* The postmaster, in the background: pg->pid. */
static int spawn_postgres(struct pg_server *pg)
{
    char port[32], sockdir[300];
    snprintf(port, sizeof port, "port=%d", pg->port);
    snprintf(sockdir, sizeof sockdir, "unix_socket_directories=%s", pg->sockdir);
    char *argv[] = { PG_FIXTURE_BINDIR "/postgres", "-D", pg->dir,
                     "-c", "fsync=off", "-c", "synchronous_commit=off",
                     "-c", "full_page_writes=off", "-c", "shared_buffers=16MB",
                     "-c", "max_connections=50", "-c", "listen_addresses=",
                     "-c", sockdir, "-c", port, "-c", "log_min_messages=warning", NULL };
    pg->pid = spawn(pg, argv);
    if (pg->pid < 0) {
        pg->pid = 0;
        return -1;
    }
    return wait_ready(pg);
}

int pg_start(struct pg_server *pg, const char *base_dir)
{
    memset(pg, 0, sizeof *pg);
    pg->owner = getpid();
    int rc = 1;
    if (access(PG_FIXTURE_BINDIR "/postgres", X_OK) < 0
        || access(PG_FIXTURE_BINDIR "/initdb", X_OK) < 0) {
        set_why(pg, "PostgreSQL 15 is not installed (no %s/postgres)", PG_FIXTURE_BINDIR);
        return 1;
    }
    if (pick_user(pg) != 0)
        return 1;
    if (make_dirs(pg, base_dir) < 0) {
        rc = -1;
        goto fail;
    }
    if (run_initdb(pg) != 0)
        goto fail;
    pg->port = 20000 + (int)(getpid() % 20000);
    snprintf(pg->conninfo, sizeof pg->conninfo, "host=%s port=%d dbname=postgres user=%s",
             pg->sockdir, pg->port, pg->user);
    rc = -1;
    if (spawn_postgres(pg) < 0)
        goto fail;
    return 0;
fail:
    pg_stop(pg);
    return rc;
}

void pg_stop(struct pg_server *pg)
{
    bool running;
    if (pg->dir[0])
        (void)stop_server(pg, SIGINT, STOP_MS, &running);
    if (!pg->sockdir[0])
        return;
    remove_tree(pg->sockdir);
    if (strncmp(pg->dir, pg->sockdir, strlen(pg->sockdir)) == 0)
        pg->dir[0] = '\0';      /* it was in there */
    pg->sockdir[0] = '\0';
}

int pg_stop_only(struct pg_server *pg)
{
    bool running;
    if (stop_server(pg, SIGINT, STOP_MS, &running) < 0) {
        set_why(pg, "postgres did not shut down in %d s: killed", STOP_MS / 1000);
        return -1;
    }
    if (!running) {
        set_why(pg, "postgres was not running");
        return -1;
    }
    return 0;
}

void pg_kill(struct pg_server *pg)
{
    pid_t pid = server_pid(pg);
    kill_hard(pid);
    if (pg->pid > 0 && pg->pid != pid)
        (void)waitpid(pg->pid, NULL, WNOHANG);
    pg->pid = 0;
}

/* A killed server leaves its socket, its socket's lock file and
 * postmaster.pid.  postgres takes a lock file for stale when the pid in it
 * is dead, but a killed postmaster that a forked test started is not our
 * child: it stays a zombie (and kill(pid, 0) succeeds) until init reaps it,
 * and in a container that can take seconds.  We know it is dead: remove
 * them.  (The old shared memory is found from the data directory's inode,
 * not from postmaster.pid, so crash clean-up is not lost.) */
static void remove_stale_locks(const struct pg_server *pg)
{
    char path[3][320];
    snprintf(path[0], sizeof path[0], "%s/.s.PGSQL.%d", pg->sockdir, pg->port);
    snprintf(path[1], sizeof path[1], "%s/.s.PGSQL.%d.lock", pg->sockdir, pg->port);
    snprintf(path[2], sizeof path[2], "%s/postmaster.pid", pg->dir);
    for (int i = 0; i < 3; i++)
        if (unlink(path[i]) < 0 && errno != ENOENT)
            fprintf(stderr, "pg_fixture: unlink %s: %s\n", path[i], strerror(errno));
}

int pg_start_again(struct pg_server *pg)
{
    if (!pg->sockdir[0] || !pg->dir[0]) {
        set_why(pg, "no cluster: pg_start it first (pg_stop removed it)");
        return -1;
    }
    pid_t pid = server_pid(pg);
    if (pid > 0 && proc_running(pid)) {
        set_why(pg, "postgres is running already (pid %d)", (int)pid);
        return -1;
    }
    remove_stale_locks(pg);
    return spawn_postgres(pg);
}

int pg_restart(struct pg_server *pg)
{
    if (pg_stop_only(pg) < 0)
        return -1;
    return pg_start_again(pg);
}

/* ---- SQL ----------------------------------------------------------------------- */

static void quiet(void *arg, const char *message)
{
    (void)arg, (void)message;
}

/* A connection to "postgres", or NULL (pg->why). */
static PGconn *connect_db(struct pg_server *pg)
{
    PGconn *c = PQconnectdb(pg->conninfo);
    if (!c) {
        set_why(pg, "PQconnectdb: out of memory");
        return NULL;
    }
    if (PQstatus(c) != CONNECTION_OK) {
        set_why(pg, "connect to %s: %s", pg->conninfo, PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    PQsetNoticeProcessor(c, quiet, NULL);
    return c;
}

/* Run sql; its last result, or NULL (pg->why) when it failed. */
static PGresult *run(struct pg_server *pg, PGconn *c, const char *sql)
{
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);   /* PGRES_FATAL_ERROR for NULL */
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY)
        return r;
    set_why(pg, "%s", r ? PQresultErrorMessage(r) : PQerrorMessage(c));
    PQclear(r);
    return NULL;
}

int pg_exec(struct pg_server *pg, const char *sql)
{
    PGconn *c = connect_db(pg);
    if (!c)
        return -1;
    PGresult *r = run(pg, c, sql);
    int rc = r ? 0 : -1;
    PQclear(r);
    PQfinish(c);
    return rc;
}

int pg_query_value(struct pg_server *pg, const char *sql, char *out, size_t outlen)
{
    if (outlen > 0)
        out[0] = '\0';
    PGconn *c = connect_db(pg);
    if (!c)
        return -1;
    PGresult *r = run(pg, c, sql);
    int rc = -1;
    if (r && (PQntuples(r) < 1 || PQnfields(r) < 1))
        set_why(pg, "no value: the query returned no row");
    else if (r) {
        if (outlen > 0)
            snprintf(out, outlen, "%s", PQgetvalue(r, 0, 0));
        rc = 0;
    }
    PQclear(r);
    PQfinish(c);
    return rc;
}
