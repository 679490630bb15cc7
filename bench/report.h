/*
 * The bench's results: rows of figures, printed as a table on stdout as
 * each run finishes, and at the end written as JSON and/or CSV with the
 * same figures; plus the per-script cost lines from INFO commandstats and
 * a summary that compares the daemon's best drain with the ceiling.
 */
#ifndef DQ_BENCH_REPORT_H
#define DQ_BENCH_REPORT_H

#include <stddef.h>

/* The figures a row may carry; NAN (the default) when not measured. */
enum report_col {
    COL_JOBS,               /* jobs in the run */
    COL_JOBS_PER_S,
    COL_REDIS_US_PER_JOB,   /* redis-server CPU (user+sys) per job */
    COL_DAEMON_US_PER_JOB,  /* CPU of all delayqd processes per job */
    COL_CLIENT_US_PER_JOB,  /* the bench's own CPU per job (client side) */
    COL_SCRIPT_US_PER_JOB,  /* time inside EVALSHA per job (commandstats) */
    COL_CALLS_PER_JOB,      /* EVALSHA calls per job */
    COL_P50_MS,             /* lateness percentiles: handler start - due */
    COL_P99_MS,
    COL_P999_MS,
    COL_MAX_MS,
    COL_CLAIM_US,           /* median dq_claim of 1 job */
    COL_ACK_US,             /* median dq_ack of 1 job */
    COL_CLAIM_ACK_US,       /* median claim + ack */
    COL_BYTES_PER_JOB,      /* used_memory delta per delayed job */
    COL_CMDS_PER_S,         /* idle: Redis commands per second */
    COL_DAEMON_CPU_MS_PER_S, /* idle: delayqd CPU per second of wall time */
    COL_SECONDS,            /* wall time of the measured part */
    COL_ENQUEUE_US,         /* median dq_enqueue of 1 job */
    COL_CALL_US,            /* producer: Redis us per script call (commandstats) */
    COL_MINIMAL_US,         /* ... per call of its minimal script */
    COL_RATIO,              /* call_us / minimal_us */
    COL_EMPTY_US,           /* ... per call of an empty script, same arguments */
    COL_ZADD_US,            /* ... per bare ZADD */
    COL_COUNT
};

struct report_row {
    char run[16];           /* drain, lateness, enqueue, idle, scale, ceiling */
    char config[48];        /* e.g. "w=2 b=16" */
    double v[COL_COUNT];
    char note[320];         /* free text for the table */
};

/* A row with every figure NAN. */
void report_row_init(struct report_row *r, const char *run, const char *config);

/* Keep the row and print it in the table (the header first, once). */
void report_add(const struct report_row *r);

/* A script's cost, from INFO commandstats around calls of that script
 * alone: its EVALSHA time, and the commands it ran inside. */
struct report_script {
    char script[16];        /* enqueue, claim, ack */
    char context[32];       /* "b=16", "one at a time", ... */
    double calls;
    double usec_per_call;
    double usec_per_job;
    double inner_usec_per_job;  /* the Redis commands run by the script */
    char inner[400];        /* their breakdown (info_breakdown) */
};

void report_add_script(const struct report_script *s);

/* A free-form line for the summary ("load average ...", "skipped ..."). */
void report_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The rows kept so far (for the summary). */
const struct report_row *report_rows(size_t *n);

/* Print the scripts and the summary after the table. */
void report_finish(void);

/* Machine facts for the JSON: nproc, CPU model, RAM, Redis version. */
void report_set_machine(const char *redis_version);

/* The command line, for the JSON. */
void report_set_command(int argc, char **argv);

/* Write everything kept as JSON / CSV.  Returns 0, or -1 with the reason. */
int report_write_json(const char *path, char *err, size_t errlen);
int report_write_csv(const char *path, char *err, size_t errlen);

#endif
