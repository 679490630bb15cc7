#include "config.h"

#include "bench/report.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define MAX_ROWS 64
#define MAX_SCRIPTS 32
#define MAX_NOTES 32

/* Column names, as in the JSON and CSV (the table shows a subset). */
static const char *const col_names[COL_COUNT] = {
    "jobs", "jobs_per_s", "redis_us_per_job", "delayqd_us_per_job",
    "client_us_per_job", "script_us_per_job", "evalsha_per_job",
    "p50_ms", "p99_ms", "p999_ms", "max_ms",
    "claim_us", "ack_us", "claim_ack_us", "bytes_per_job",
    "cmds_per_s", "delayqd_cpu_ms_per_s", "seconds", "enqueue_us",
    "call_us", "minimal_us", "ratio_to_minimal", "empty_us", "zadd_us",
};

static struct {
    struct report_row rows[MAX_ROWS];
    size_t nrows;
    struct report_script scripts[MAX_SCRIPTS];
    size_t nscripts;
    char notes[MAX_NOTES][256];
    size_t nnotes;
    int header_done;
    char cpu_model[128];
    long nproc;
    long long ram_kb;
    char redis_version[32];
    char kernel[160];
    char loadavg[64];
    char started[32];
    char command[1024];
} rep;

void report_row_init(struct report_row *r, const char *run, const char *config)
{
    memset(r, 0, sizeof *r);
    snprintf(r->run, sizeof r->run, "%s", run);
    snprintf(r->config, sizeof r->config, "%s", config);
    for (int i = 0; i < COL_COUNT; i++)
        r->v[i] = NAN;
}

/* ---- the table ------------------------------------------------------------ */

static void cell(char *out, size_t len, double v, int decimals)
{
    if (isnan(v))
        snprintf(out, len, "-");
    else
        snprintf(out, len, "%.*f", decimals, v);
}

static void print_header(void)
{
    printf("%-9s %-18s %8s %9s %12s %14s %7s %7s %8s %7s  %s\n", "run", "config", "jobs",
           "jobs/s", "redis_us/job", "delayqd_us/job", "p50_ms", "p99_ms", "p99.9_ms",
           "max_ms", "note");
}

void report_add(const struct report_row *r)
{
    if (rep.nrows < MAX_ROWS)
        rep.rows[rep.nrows++] = *r;
    if (!rep.header_done) {
        print_header();
        rep.header_done = 1;
    }
    char jobs[24], rate[24], redis[24], daemon[24], p50[24], p99[24], p999[24], max[24];
    cell(jobs, sizeof jobs, r->v[COL_JOBS], 0);
    cell(rate, sizeof rate, r->v[COL_JOBS_PER_S], 0);
    cell(redis, sizeof redis, r->v[COL_REDIS_US_PER_JOB], 2);
    cell(daemon, sizeof daemon, r->v[COL_DAEMON_US_PER_JOB], 2);
    cell(p50, sizeof p50, r->v[COL_P50_MS], 2);
    cell(p99, sizeof p99, r->v[COL_P99_MS], 2);
    cell(p999, sizeof p999, r->v[COL_P999_MS], 2);
    cell(max, sizeof max, r->v[COL_MAX_MS], 2);
    printf("%-9s %-18s %8s %9s %12s %14s %7s %7s %8s %7s  %s\n", r->run, r->config, jobs,
           rate, redis, daemon, p50, p99, p999, max, r->note);
    fflush(stdout);
}

const struct report_row *report_rows(size_t *n)
{
    *n = rep.nrows;
    return rep.rows;
}

void report_add_script(const struct report_script *s)
{
    if (rep.nscripts < MAX_SCRIPTS)
        rep.scripts[rep.nscripts++] = *s;
}

void report_note(const char *fmt, ...)
{
    if (rep.nnotes == MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rep.notes[rep.nnotes++], sizeof rep.notes[0], fmt, ap);
    va_end(ap);
}

/* ---- the summary ---------------------------------------------------------- */

struct summary {
    const struct report_row *best_drain, *best_drain_w2, *ceiling;
};

static int workers_of(const struct report_row *r)
{
    int w = 0;
    sscanf(r->config, "w=%d", &w);
    return w;
}

static void summarize(struct summary *s)
{
    memset(s, 0, sizeof *s);
    for (size_t i = 0; i < rep.nrows; i++) {
        const struct report_row *r = &rep.rows[i];
        double v = r->v[COL_JOBS_PER_S];
        if (isnan(v))
            continue;
        if (strcmp(r->run, "drain") == 0) {
            if (!s->best_drain || v > s->best_drain->v[COL_JOBS_PER_S])
                s->best_drain = r;
            if (workers_of(r) == 2
                && (!s->best_drain_w2 || v > s->best_drain_w2->v[COL_JOBS_PER_S]))
                s->best_drain_w2 = r;
        } else if (strcmp(r->run, "ceiling") == 0) {
            if (!s->ceiling || v > s->ceiling->v[COL_JOBS_PER_S])
                s->ceiling = r;
        }
    }
}

static double fraction(const struct report_row *drain, const struct report_row *ceiling)
{
    if (!drain || !ceiling)
        return NAN;
    return drain->v[COL_JOBS_PER_S] / ceiling->v[COL_JOBS_PER_S];
}

void report_finish(void)
{
    if (rep.nscripts > 0) {
        printf("\nscripts (INFO commandstats around calls of one script; inner = the "
               "commands it ran, as command:us per job/calls per job)\n");
        printf("%-8s %-14s %9s %10s %9s %9s  %s\n", "script", "context", "calls",
               "us/call", "us/job", "inner/job", "inner");
        for (size_t i = 0; i < rep.nscripts; i++) {
            const struct report_script *s = &rep.scripts[i];
            printf("%-8s %-14s %9.0f %10.2f %9.2f %9.2f  %s\n", s->script, s->context,
                   s->calls, s->usec_per_call, s->usec_per_job, s->inner_usec_per_job,
                   s->inner);
        }
    }
    struct summary s;
    summarize(&s);
    if (s.best_drain || s.ceiling || rep.nnotes)
        printf("\n");
    if (s.best_drain && s.ceiling)
        printf("best drain %.0f jobs/s (%s) = %.0f%% of the ceiling %.0f jobs/s (%s)\n",
               s.best_drain->v[COL_JOBS_PER_S], s.best_drain->config,
               100 * fraction(s.best_drain, s.ceiling), s.ceiling->v[COL_JOBS_PER_S],
               s.ceiling->config);
    if (s.best_drain_w2 && s.ceiling)
        printf("best drain with 2 workers %.0f jobs/s (%s) = %.0f%% of the ceiling\n",
               s.best_drain_w2->v[COL_JOBS_PER_S], s.best_drain_w2->config,
               100 * fraction(s.best_drain_w2, s.ceiling));
    for (size_t i = 0; i < rep.nnotes; i++)
        printf("%s\n", rep.notes[i]);
    fflush(stdout);
}

/* ---- machine ---------------------------------------------------------------- */

static void read_first(const char *path, const char *key, char *out, size_t outlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return;
    char line[512];
    size_t klen = strlen(key);
    while (fgets(line, sizeof line, fp))
        if (strncmp(line, key, klen) == 0) {
            const char *v = strchr(line, ':');
            v = v ? v + 1 : line + klen;
            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(out, outlen, "%s", v);
            out[strcspn(out, "\n")] = '\0';
            break;
        }
    fclose(fp);
}

void report_set_machine(const char *redis_version)
{
    rep.nproc = sysconf(_SC_NPROCESSORS_ONLN);
    read_first("/proc/cpuinfo", "model name", rep.cpu_model, sizeof rep.cpu_model);
    char mem[64] = "";
    read_first("/proc/meminfo", "MemTotal", mem, sizeof mem);
    rep.ram_kb = atoll(mem);
    snprintf(rep.redis_version, sizeof rep.redis_version, "%s", redis_version);
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(rep.kernel, sizeof rep.kernel, "%s %s", u.sysname, u.release);
    FILE *fp = fopen("/proc/loadavg", "r");
    if (fp) {
        if (fgets(rep.loadavg, sizeof rep.loadavg, fp))
            rep.loadavg[strcspn(rep.loadavg, "\n")] = '\0';
        fclose(fp);
    }
    time_t now = time(NULL);
    strftime(rep.started, sizeof rep.started, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
}

void report_set_command(int argc, char **argv)
{
    size_t used = 0;
    for (int i = 0; i < argc && used < sizeof rep.command; i++) {
        int w = snprintf(rep.command + used, sizeof rep.command - used, "%s%s",
                         i ? " " : "", argv[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* ---- JSON and CSV --------------------------------------------------------- */

static void json_str(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(fp, "\\%c", c);
        else if (c < 0x20)
            fprintf(fp, "\\u%04x", c);
        else
            fputc(c, fp);
    }
    fputc('"', fp);
}

static void json_num(FILE *fp, double v)
{
    if (isnan(v) || isinf(v))
        fputs("null", fp);
    else
        fprintf(fp, "%.6g", v);
}

static void json_rows(FILE *fp)
{
    fputs("  \"rows\": [\n", fp);
    for (size_t i = 0; i < rep.nrows; i++) {
        const struct report_row *r = &rep.rows[i];
        fputs("    {\"run\": ", fp);
        json_str(fp, r->run);
        fputs(", \"config\": ", fp);
        json_str(fp, r->config);
        for (int c = 0; c < COL_COUNT; c++) {
            fprintf(fp, ", \"%s\": ", col_names[c]);
            json_num(fp, r->v[c]);
        }
        fputs(", \"note\": ", fp);
        json_str(fp, r->note);
        fprintf(fp, "}%s\n", i + 1 < rep.nrows ? "," : "");
    }
    fputs("  ],\n", fp);
}

static void json_scripts(FILE *fp)
{
    fputs("  \"scripts\": [\n", fp);
    for (size_t i = 0; i < rep.nscripts; i++) {
        const struct report_script *s = &rep.scripts[i];
        fputs("    {\"script\": ", fp);
        json_str(fp, s->script);
        fputs(", \"context\": ", fp);
        json_str(fp, s->context);
        fputs(", \"calls\": ", fp);
        json_num(fp, s->calls);
        fputs(", \"usec_per_call\": ", fp);
        json_num(fp, s->usec_per_call);
        fputs(", \"usec_per_job\": ", fp);
        json_num(fp, s->usec_per_job);
        fputs(", \"inner_usec_per_job\": ", fp);
        json_num(fp, s->inner_usec_per_job);
        fputs(", \"inner\": ", fp);
        json_str(fp, s->inner);
        fprintf(fp, "}%s\n", i + 1 < rep.nscripts ? "," : "");
    }
    fputs("  ],\n", fp);
}

int report_write_json(const char *path, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    fputs("{\n  \"machine\": {\"nproc\": ", fp);
    fprintf(fp, "%ld, \"cpu_model\": ", rep.nproc);
    json_str(fp, rep.cpu_model);
    fprintf(fp, ", \"ram_kb\": %lld, \"kernel\": ", rep.ram_kb);
    json_str(fp, rep.kernel);
    fputs(", \"redis_version\": ", fp);
    json_str(fp, rep.redis_version);
    fputs(", \"loadavg_at_start\": ", fp);
    json_str(fp, rep.loadavg);
    fputs("},\n  \"started\": ", fp);
    json_str(fp, rep.started);
    fputs(",\n  \"command\": ", fp);
    json_str(fp, rep.command);
    fputs(",\n", fp);
    json_rows(fp);
    json_scripts(fp);
    struct summary s;
    summarize(&s);
    fputs("  \"summary\": {\"best_drain_jobs_per_s\": ", fp);
    json_num(fp, s.best_drain ? s.best_drain->v[COL_JOBS_PER_S] : NAN);
    fputs(", \"best_drain_config\": ", fp);
    json_str(fp, s.best_drain ? s.best_drain->config : "");
    fputs(", \"best_drain_2_workers_jobs_per_s\": ", fp);
    json_num(fp, s.best_drain_w2 ? s.best_drain_w2->v[COL_JOBS_PER_S] : NAN);
    fputs(", \"ceiling_jobs_per_s\": ", fp);
    json_num(fp, s.ceiling ? s.ceiling->v[COL_JOBS_PER_S] : NAN);
    fputs(", \"best_drain_fraction_of_ceiling\": ", fp);
    json_num(fp, fraction(s.best_drain, s.ceiling));
    fputs(", \"best_drain_2_workers_fraction_of_ceiling\": ", fp);
    json_num(fp, fraction(s.best_drain_w2, s.ceiling));
    fputs(", \"notes\": [", fp);
    for (size_t i = 0; i < rep.nnotes; i++) {
        json_str(fp, rep.notes[i]);
        fputs(i + 1 < rep.nnotes ? ", " : "", fp);
    }
    fputs("]}\n}\n", fp);
    if (fclose(fp) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static void csv_str(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', fp);
        fputc(*s, fp);
    }
    fputc('"', fp);
}

int report_write_csv(const char *path, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "w");
    if (!fp) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    fputs("run,config", fp);
    for (int c = 0; c < COL_COUNT; c++)
        fprintf(fp, ",%s", col_names[c]);
    fputs(",note\n", fp);
    for (size_t i = 0; i < rep.nrows; i++) {
        const struct report_row *r = &rep.rows[i];
        csv_str(fp, r->run);
        fputc(',', fp);
        csv_str(fp, r->config);
        for (int c = 0; c < COL_COUNT; c++) {
            if (isnan(r->v[c]))
                fputc(',', fp);
            else
                fprintf(fp, ",%.6g", r->v[c]);
        }
        fputc(',', fp);
        csv_str(fp, r->note);
        fputc('\n', fp);
    }
    if (fclose(fp) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}
