/*
 * conformance-driver: the cases of tests/conformance/cases.json run
 * through libdelayq (README.md in this directory has the format).
 *
 *   conformance-c [CASES.json [REDIS_SERVER]]
 *
 * By default $srcdir/tests/conformance/cases.json and $REDIS_SERVER (else
 * redis-server from PATH); without a redis-server it says so in one line
 * and exits 77 (skipped).
 * Starts two private redis-servers on unix sockets in a temporary
 * directory (one plain, one with requirepass) and stops them by pid;
 * prints "N passed, N failed" last; exits 0 only when none failed.
 * libdelayq connects when the client is made, so in the cases whose
 * connection cannot be made ("connect": "missing_socket",
 * "wrong_password") every call's outcome is that failure.
 */
#include "driver.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PASSWORD "conformance-secret"

struct server {
    pid_t pid;
    char sock[320];
};

static int start_server(const char *binary, const char *dir, const char *name,
                        const char *password, struct server *s)
{
    char sub[300];
    snprintf(sub, sizeof sub, "%s/%s", dir, name);
    if (mkdir(sub, 0700) < 0)
        return -1;
    snprintf(s->sock, sizeof s->sock, "%s/redis.sock", sub);
    s->pid = fork();
    if (s->pid < 0)
        return -1;
    if (s->pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        if (password)
            execl(binary, binary, "--port", "0", "--unixsocket", s->sock, "--save", "",
                  "--appendonly", "no", "--dir", sub, "--requirepass", password, (char *)NULL);
        else
            execl(binary, binary, "--port", "0", "--unixsocket", s->sock, "--save", "",
                  "--appendonly", "no", "--dir", sub, (char *)NULL);
        _exit(127);
    }
    for (int k = 0; k < 250; k++) {
        redisContext *c = redisConnectUnix(s->sock);
        if (c && !c->err) {
            redisFree(c);
            return 0;
        }
        if (c)
            redisFree(c);
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
    return -1;
}

static void stop_server(struct server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

/* ---- comparing ---------------------------------------------------------------- */

static int payload_equal(const struct jv *got, const struct jv *want)
{
    const struct jv *hex = json_get(want, "hex"), *rep = json_get(want, "repeat");
    if (hex) {
        if (got->len * 2 != hex->len)
            return 0;
        for (size_t k = 0; k < got->len; k++) {
            unsigned x;
            if (sscanf(hex->s + 2 * k, "%2x", &x) != 1 || (unsigned char)got->s[k] != x)
                return 0;
        }
        return 1;
    }
    const struct jv *times = json_get(want, "times");
    if (!rep || !times || got->len != rep->len * (size_t)times->i)
        return 0;
    for (size_t k = 0; k < got->len; k++)
        if (got->s[k] != rep->s[k % rep->len])
            return 0;
    return 1;
}

/* As run.py's same(): with exact 0, objects compare only want's keys. */
static int same(const struct jv *got, const struct jv *want, int exact)
{
    if (want->t == J_OBJ && (json_get(want, "hex") || json_get(want, "repeat"))
        && (got->t == J_BYTES || got->t == J_STR))
        return payload_equal(got, want);
    if (got->t == J_BYTES || got->t == J_STR)
        return want->t == J_STR && got->len == want->len && memcmp(got->s, want->s, got->len) == 0;
    if (want->t != got->t)
        return 0;
    switch (want->t) {
    case J_NULL: return 1;
    case J_BOOL:
    case J_INT: return got->i == want->i;
    case J_OBJ:
        if (exact && got->n != want->n)
            return 0;
        for (size_t k = 0; k < want->n; k++) {
            const struct jv *g = json_get(got, want->keys[k]);
            if (!g || !same(g, want->items[k], exact))
                return 0;
        }
        return 1;
    case J_ARR:
        if (got->n != want->n)
            return 0;
        for (size_t k = 0; k < want->n; k++)
            if (!same(got->items[k], want->items[k], exact))
                return 0;
        return 1;
    default: return 0;
    }
}

static int of_type(const struct jv *got, const char *t)
{
    if (strcmp(t, "generated_id") == 0)
        return got->t == J_STR && got->len && strspn(got->s, "0123456789") == got->len;
    if (strcmp(t, "time_ms") == 0)
        return got->t == J_INT && got->i > 0;
    if (strcmp(t, "schedule_run_id") == 0)
        return got->t == J_STR && strstr(got->s, "@now-") && got->s[got->len - 1] == 'Z';
    return 0;
}

/* ---- one step, one case --------------------------------------------------------- */

/* `v` with every string "$name" (a value or a key) replaced by what the
 * step saved as name returned; a new tree. */
static struct jv *substitute(const struct jv *v, const struct jv *saved)
{
    if (v->t == J_STR && v->s[0] == '$' && json_get(saved, v->s + 1))
        return jv_copy(json_get(saved, v->s + 1));
    struct jv *c = v->t == J_OBJ ? jv_obj() : v->t == J_ARR ? jv_arr() : jv_copy(v);
    for (size_t k = 0; (v->t == J_OBJ || v->t == J_ARR) && k < v->n; k++) {
        struct jv *item = substitute(v->items[k], saved);
        if (v->t == J_ARR) {
            jv_push(c, item);
            continue;
        }
        const struct jv *key = json_get(saved, v->keys[k][0] == '$' ? v->keys[k] + 1 : "");
        jv_set(c, key && key->t == J_STR ? key->s : v->keys[k], item);
    }
    return c;
}

/* Run a step; 0 when it behaved, else -1 with why. */
static int run_step(struct case_run *r, const struct jv *raw_step, struct jv *saved,
                    char *why, size_t len)
{
    struct jv *step = substitute(raw_step, saved);
    const char *call = json_get(step, "call")->s;
    const struct jv *args = json_get(step, "args"), *raises = json_get(step, "raises");
    const struct jv *ret = json_get(step, "returns"), *fields = json_get(step, "returns_fields");
    const struct jv *type = json_get(step, "returns_type"), *save = json_get(step, "save_as");
    struct jv empty = { .t = J_OBJ };
    struct outcome o;
    call_run(r, call, args ? args : &empty, &o);
    int ok = 1;
    char *text = o.result ? json_text(o.result) : NULL;
    if (o.status != DQ_OK) {
        const char *code = driver_status_name(o.status);
        ok = raises && strcmp(raises->s, code) == 0;
        if (!ok)
            snprintf(why, len, "raised %s (%s)%s%s", code, o.msg, raises ? ", expected " : "",
                     raises ? raises->s : "");
    } else if (raises) {
        ok = 0;
        snprintf(why, len, "returned %s, expected to raise %s", text, raises->s);
    } else if ((ret && !same(o.result, ret, 1)) || (fields && !same(o.result, fields, 0))
               || (type && !of_type(o.result, type->s))) {
        ok = 0;
        char *want = json_text(ret ? ret : fields ? fields : type);
        snprintf(why, len, "returned %s, expected %s", text, want);
        free(want);
    }
    if (ok && save && o.result)
        jv_set(saved, save->s, jv_copy(o.result));
    free(text);
    json_free(o.result);
    json_free(step);
    return ok ? 0 : -1;
}

struct env {
    struct server plain, auth;
    char missing[300];
};

static dq_client *connect_for(const struct env *e, const char *mode, dq_status *st,
                              char *err, size_t len)
{
    dq_options opt;
    dq_options_init(&opt);
    opt.unix_path = e->plain.sock;
    if (mode && strcmp(mode, "missing_socket") == 0) {
        opt.unix_path = e->missing;
        opt.connect_timeout_ms = 500;
    } else if (mode && strcmp(mode, "wrong_password") == 0) {
        opt.unix_path = e->auth.sock;
        opt.password = "wrong";
    }
    return dq_connect(&opt, err, len, st);
}

static int run_case(const struct env *e, const struct jv *c, unsigned n, int idx,
                    char *why, size_t len)
{
    char queue[64];
    snprintf(queue, sizeof queue, "cf%d-%d-%u", (int)getpid() % 10000, idx, n);
    struct case_run r = { .queue = queue, .nparts = n };
    r.raw = redisConnectUnix(e->plain.sock);
    freeReplyObject(redisCommand(r.raw, "FLUSHALL"));
    const struct jv *mode = json_get(c, "connect"), *wake = json_get(c, "subscribe_wake");
    r.c = connect_for(e, mode ? mode->s : NULL, &r.connect_status, r.connect_err,
                      sizeof r.connect_err);
    int rc = 0;
    if (wake && wake->i && direct_subscribe(&r, e->plain.sock) < 0) {
        snprintf(why, len, "cannot subscribe to the wake channels");
        rc = -1;
    }
    if (rc == 0 && n != 1 && r.c && dq_queue_set_partitions(r.c, queue, n) != DQ_OK) {
        snprintf(why, len, "setting %u partitions: %s", n, dq_errmsg(r.c));
        rc = -1;
    }
    const struct jv *steps = json_get(c, "steps");
    struct jv *saved = jv_obj();
    for (size_t k = 0; rc == 0 && k < steps->n; k++) {
        char step_why[2048];
        if (run_step(&r, steps->items[k], saved, step_why, sizeof step_why) < 0) {
            snprintf(why, len, "step %zu (%s): %s", k + 1,
                     json_get(steps->items[k], "call")->s, step_why);
            rc = -1;
        }
    }
    json_free(saved);
    dq_close(r.c);
    if (r.sub)
        redisFree(r.sub);
    redisFree(r.raw);
    return rc;
}

/* $REDIS_SERVER, else redis-server in PATH; NULL when neither runs. */
static const char *find_server(void)
{
    static char path[1024];
    const char *env = getenv("REDIS_SERVER");
    if (env && *env)
        return access(env, X_OK) == 0 ? env : NULL;
    const char *dirs = getenv("PATH");
    for (const char *d = dirs ? dirs : "/usr/bin:/bin"; *d;) {
        size_t n = strcspn(d, ":");
        snprintf(path, sizeof path, "%.*s/redis-server", (int)n, d);
        if (access(path, X_OK) == 0)
            return path;
        d += n + (d[n] == ':');
    }
    return NULL;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0)
        if ((n += got) + 1 >= cap)
            buf = realloc(buf, cap *= 2);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

int main(int argc, char **argv)
{
    if (argc > 3) {
        fprintf(stderr, "usage: %s [CASES.json [REDIS_SERVER]]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    char cases_path[1024];
    const char *srcdir = getenv("srcdir");
    snprintf(cases_path, sizeof cases_path, "%s", argc > 1 ? argv[1] : "");
    if (argc < 2)
        snprintf(cases_path, sizeof cases_path, "%s/tests/conformance/cases.json",
                 srcdir ? srcdir : ".");
    const char *server = argc > 2 ? argv[2] : find_server();
    if (!server) {
        printf("C conformance skipped: no redis-server (apt-get install redis-server)\n");
        return 77;
    }
    char *text = read_file(cases_path), err[256];
    if (!text) {
        fprintf(stderr, "conformance: %s: %s\n", cases_path, strerror(errno));
        return 1;
    }
    struct jv *doc = json_parse(text, err, sizeof err);
    free(text);
    if (!doc || !json_get(doc, "version") || json_get(doc, "version")->i != 1) {
        fprintf(stderr, "conformance: %s: %s\n", cases_path, doc ? "version is not 1" : err);
        return 1;
    }
    char dir[] = "/tmp/conformance-c.XXXXXX";
    struct env e = { { 0 }, { 0 }, "" };
    if (!mkdtemp(dir)) {
        fprintf(stderr, "conformance: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    snprintf(e.missing, sizeof e.missing, "%s/absent.sock", dir);
    int passed = 0, failed = 0, started = 1;
    if (start_server(server, dir, "plain", NULL, &e.plain) < 0
        || start_server(server, dir, "auth", PASSWORD, &e.auth) < 0) {
        fprintf(stderr, "conformance: cannot start %s\n", server);
        failed = 1;
        started = 0;
    }
    const struct jv *cases = json_get(doc, "cases");
    for (size_t k = 0; started && k < cases->n; k++) {
        const struct jv *c = cases->items[k], *parts = json_get(c, "partitions");
        for (size_t p = 0; p < (parts ? parts->n : 1); p++) {
            unsigned n = parts ? (unsigned)parts->items[p]->i : 1;
            char why[4096];
            if (run_case(&e, c, n, (int)k, why, sizeof why) < 0) {
                failed++;
                printf("FAIL %s [partitions %u]: %s\n", json_get(c, "name")->s, n, why);
            } else {
                passed++;
            }
        }
    }
    stop_server(&e.plain);
    stop_server(&e.auth);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "conformance: could not remove %s\n", dir);
    json_free(doc);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
