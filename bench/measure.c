#include "config.h"

#include "bench/measure.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "tests/testutil.h"

/* ---- CPU from /proc ------------------------------------------------------- */

/* CPU ticks of a process: its own and that of its children it waited for
 * (a child that exited and was reaped is in its parent's cutime/cstime). */
static int64_t cpu_ticks(const struct tu_proc_stat *ps)
{
    return ps->utime + ps->stime + ps->cutime + ps->cstime;
}

static int64_t sys_ticks(const struct tu_proc_stat *ps)
{
    return ps->stime + ps->cstime;
}

static int64_t ticks_to_us(int64_t ticks)
{
    static long hz;
    if (hz <= 0)
        hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        hz = 100;
    return ticks * 1000000 / hz;
}

/* From /proc/PID/task/TID/schedstat (nanoseconds): over a drain of a
 * tenth of a second, 10 ms ticks moved each master's figure by 0.1 µs a
 * job. */
int64_t measure_proc_runtime_us(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int64_t ns = 0;
    int seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char f[sizeof path + sizeof e->d_name + 16];
        snprintf(f, sizeof f, "%s/%s/schedstat", path, e->d_name);
        FILE *fp = fopen(f, "r");
        long long run = 0;
        if (!fp)
            continue;           /* the thread ended meanwhile */
        if (fscanf(fp, "%lld", &run) == 1) {
            ns += run;
            seen = 1;
        }
        fclose(fp);
    }
    closedir(d);
    return seen ? ns / 1000 : -1;
}

int64_t measure_proc_cpu_us(pid_t pid, int64_t *sys_us)
{
    struct tu_proc_stat ps;
    if (tu_proc_stat(pid, &ps) < 0)
        return -1;
    if (sys_us)
        *sys_us = ticks_to_us(sys_ticks(&ps));
    return ticks_to_us(cpu_ticks(&ps));
}

/* Every process at one instant (tu_proc_each); `v` NULL when out of
 * memory at the start, shorter than the list when later. */
struct proc_list {
    struct tu_proc_stat *v;
    size_t n, cap;
};

static int add_proc(const struct tu_proc_stat *ps, void *arg)
{
    struct proc_list *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 256;
        struct tu_proc_stat *more = realloc(l->v, cap * sizeof *more);
        if (!more)
            return 1;
        l->v = more;
        l->cap = cap;
    }
    l->v[l->n++] = *ps;
    return 0;
}

int64_t measure_tree_cpu_us(pid_t root, int64_t *sys_us)
{
    struct tu_proc_stat rs;
    if (tu_proc_stat(root, &rs) < 0)
        return -1;
    int64_t ticks = cpu_ticks(&rs), sys = sys_ticks(&rs);
    /* Every process, then the descendants of root by repeated passes over
     * the parent links (a few hundred processes at most). */
    struct proc_list all = { NULL, 0, 0 };
    tu_proc_each(add_proc, &all);
    size_t n = all.n;
    char *in = calloc(n ? n : 1, 1);
    pid_t *members = malloc((n + 1) * sizeof *members);
    if (in && members) {
        size_t nm = 0;
        members[nm++] = root;
        for (size_t m = 0; m < nm; m++)
            for (size_t i = 0; i < n; i++)
                if (!in[i] && all.v[i].ppid == members[m] && all.v[i].pid != root) {
                    in[i] = 1;
                    members[nm++] = all.v[i].pid;
                    ticks += cpu_ticks(&all.v[i]);
                    sys += sys_ticks(&all.v[i]);
                }
    }
    free(members);
    free(in);
    free(all.v);
    if (sys_us)
        *sys_us = ticks_to_us(sys);
    return ticks_to_us(ticks);
}

void measure_cpu(struct cpu_sample *s, pid_t redis, pid_t daemon)
{
    memset(s, 0, sizeof *s);
    s->wall_us = bench_mono_us();
    if (redis > 0)
        s->redis_us = measure_proc_cpu_us(redis, &s->redis_sys_us);
    if (daemon > 0)
        s->daemon_us = measure_tree_cpu_us(daemon, &s->daemon_sys_us);
    s->self_us = bench_self_cpu_us();
}

double measure_sys_pct(const struct cpu_sample *a, const struct cpu_sample *b, int daemon)
{
    int64_t all = daemon ? b->daemon_us - a->daemon_us : b->redis_us - a->redis_us;
    int64_t sys = daemon ? b->daemon_sys_us - a->daemon_sys_us
                         : b->redis_sys_us - a->redis_sys_us;
    return all > 0 ? 100.0 * (double)sys / (double)all : 0;
}

/* ---- INFO ---------------------------------------------------------------- */

/* "cmdstat_zadd:calls=3,usec=12,usec_per_call=4.00,..." */
static void parse_cmdstat(struct info_snap *s, const char *line)
{
    const char *colon = strchr(line, ':');
    if (!colon || s->ncmds == INFO_MAX_CMDS)
        return;
    struct cmd_stat *c = &s->cmds[s->ncmds];
    size_t len = (size_t)(colon - line) - strlen("cmdstat_");
    if (len >= sizeof c->name)
        len = sizeof c->name - 1;
    memcpy(c->name, line + strlen("cmdstat_"), len);
    c->name[len] = '\0';
    const char *calls = strstr(colon, "calls=");
    const char *usec = strstr(colon, "usec=");
    c->calls = calls ? strtod(calls + 6, NULL) : 0;
    c->usec = usec ? strtod(usec + 5, NULL) : 0;
    s->ncmds++;
}

int info_take(redisContext *rc, struct info_snap *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    redisReply *r = redisCommand(rc, "INFO stats commandstats memory");
    if (!r || r->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "INFO: %s", r ? (r->str ? r->str : "odd reply") : rc->errstr);
        if (r)
            freeReplyObject(r);
        return -1;
    }
    char *save;
    for (char *line = strtok_r(r->str, "\r\n", &save); line;
         line = strtok_r(NULL, "\r\n", &save)) {
        if (strncmp(line, "total_commands_processed:", 25) == 0)
            s->total_commands = strtod(line + 25, NULL);
        else if (strncmp(line, "used_memory:", 12) == 0)
            s->used_memory = strtod(line + 12, NULL);
        else if (strncmp(line, "cmdstat_", 8) == 0)
            parse_cmdstat(s, line);
    }
    freeReplyObject(r);
    return 0;
}

struct cmd_stat info_cmd(const struct info_snap *s, const char *name)
{
    for (size_t i = 0; i < s->ncmds; i++)
        if (strcmp(s->cmds[i].name, name) == 0)
            return s->cmds[i];
    struct cmd_stat none;
    memset(&none, 0, sizeof none);
    snprintf(none.name, sizeof none.name, "%s", name);
    return none;
}

void info_delta(const struct info_snap *after, const struct info_snap *before,
                struct info_snap *out)
{
    memset(out, 0, sizeof *out);
    out->total_commands = after->total_commands - before->total_commands;
    out->used_memory = after->used_memory - before->used_memory;
    for (size_t i = 0; i < after->ncmds; i++) {
        struct cmd_stat b = info_cmd(before, after->cmds[i].name);
        struct cmd_stat *c = &out->cmds[out->ncmds];
        *c = after->cmds[i];
        c->calls -= b.calls;
        c->usec -= b.usec;
        if (c->calls > 0 || c->usec > 0)
            out->ncmds++;
    }
}

void info_accumulate(struct info_snap *acc, const struct info_snap *d)
{
    acc->total_commands += d->total_commands;
    acc->used_memory += d->used_memory;
    for (size_t i = 0; i < d->ncmds; i++) {
        size_t j = 0;
        while (j < acc->ncmds && strcmp(acc->cmds[j].name, d->cmds[i].name) != 0)
            j++;
        if (j == acc->ncmds) {
            if (acc->ncmds == INFO_MAX_CMDS)
                continue;
            acc->cmds[acc->ncmds++] = d->cmds[i];
            continue;
        }
        acc->cmds[j].calls += d->cmds[i].calls;
        acc->cmds[j].usec += d->cmds[i].usec;
    }
}

static int by_usec_desc(const void *a, const void *b)
{
    const struct cmd_stat *x = a, *y = b;
    return (x->usec < y->usec) - (x->usec > y->usec);
}

void info_breakdown(const struct info_snap *delta, double jobs, const char *skip,
                    size_t max, char *out, size_t outlen)
{
    struct cmd_stat sorted[INFO_MAX_CMDS];
    size_t n = 0;
    for (size_t i = 0; i < delta->ncmds; i++)
        if ((!skip || strcmp(delta->cmds[i].name, skip) != 0)
            && strcmp(delta->cmds[i].name, "info") != 0)
            sorted[n++] = delta->cmds[i];
    qsort(sorted, n, sizeof *sorted, by_usec_desc);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && i < max && used < outlen; i++) {
        int w = snprintf(out + used, outlen - used, "%s%s:%.2fus/%.3g", i ? " " : "",
                         sorted[i].name, jobs > 0 ? sorted[i].usec / jobs : 0,
                         jobs > 0 ? sorted[i].calls / jobs : 0);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}
