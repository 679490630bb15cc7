/*
 * libdelayq: the C client of the delayq delayed-job system.
 *
 * A dq_client holds one blocking connection to Redis.  It is not thread-safe:
 * use one client per thread.  Every call returns a dq_status; on anything but
 * DQ_OK, dq_errmsg() describes the failure in one line.  The library never
 * exits, aborts or prints; a write to a connection the server closed does
 * not raise SIGPIPE in the caller (it is blocked during each call).
 *
 * Strings handed to the library are copied or used only during the call.
 * Results that own memory (dq_job, dq_claim_result, dq_dead_page) are freed
 * with their own dq_*_free function.
 *
 * The Redis key layout and the scripts are described in docs/protocol.md.
 */
#ifndef DELAYQ_CLIENT_H
#define DELAYQ_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any incompatible change to this header. */
#define DQ_CLIENT_API_VERSION 1

#define DQ_DEFAULT_PREFIX "dq"
#define DQ_DEFAULT_MAX_PAYLOAD (1024 * 1024)
#define DQ_QUEUE_MAX 128   /* bytes in a queue name */
#define DQ_TYPE_MAX 128    /* bytes in a job type */
#define DQ_ID_MAX 256      /* bytes in a job id */
#define DQ_CLAIM_MAX 1000  /* jobs in one claim */
/* How far ahead a job may be due: 100 years of 365 days, in ms.  A longer
 * delay, or an absolute time further from now, is refused (DQ_ERR_INVALID):
 * it is a mistake (a unit mixed up, an overflow) that would park the job
 * for ever.  The scripts refuse the same against the Redis server's clock. */
#define DQ_MAX_AHEAD_MS INT64_C(3153600000000)

typedef enum dq_status {
    DQ_OK = 0,
    DQ_ERR_INVALID,   /* the caller's argument is unusable (see message) */
    DQ_ERR_NOTFOUND,  /* no such job (in the state asked for) */
    DQ_ERR_EXISTS,    /* enqueue: the id is taken and replace was not asked */
    DQ_ERR_RUNNING,   /* the job is being processed and cannot be changed */
    DQ_ERR_DEAD,      /* cancel: the job is dead already (purge it instead) */
    DQ_ERR_STALE,     /* ack/fail: the job is no longer held under this fence */
    DQ_ERR_TOO_LARGE, /* the payload is over the configured limit */
    DQ_ERR_CONNECT,   /* Redis could not be reached, or the connection broke */
    DQ_ERR_AUTH,      /* Redis refused the password or user, or SELECT */
    DQ_ERR_TIMEOUT,   /* Redis did not answer within the command timeout */
    DQ_ERR_REDIS,     /* Redis answered with an error */
    DQ_ERR_NOMEM,
    DQ_ERR_UNIQUE     /* enqueue: the job of this id finished within its
                         dedupe window (dq_enqueued says when) */
} dq_status;

/* A short constant name for a status ("not found", "timeout", ...). */
const char *dq_status_str(dq_status st);

/*
 * TLS to Redis and to the sentinels (OpenSSL).  With `enable` 0 (the
 * default) the connection is plain TCP or a unix socket.  With `verify` 1
 * (the default) the server's chain must lead to a CA of ca_file / ca_dir
 * (or the system's, when both are NULL) and its certificate must name
 * server_name (or, when that is NULL, the host connected to).  A client
 * certificate is sent when cert_file and key_file are both set.
 */
typedef struct dq_tls_options {
    int enable;                /* 1: TLS */
    const char *ca_file;       /* PEM bundle of trusted CAs, or NULL */
    const char *ca_dir;        /* directory of hashed CA certificates, or NULL */
    const char *cert_file;     /* client certificate (PEM), or NULL */
    const char *key_file;      /* its private key (PEM), or NULL */
    const char *server_name;   /* SNI and the name checked; NULL: the host */
    int verify;                /* 1 (default); 0 trusts any server (tests only) */
} dq_tls_options;

/*
 * Redis behind Sentinel.  With `master` set, host/port/unix_path are not
 * used: the address of the master comes from the sentinels, asked in turn
 * ("SENTINEL get-master-addr-by-name"), and is looked up again at every
 * reconnect and whenever the server says it is no longer the master.  The
 * sentinels are reached with the same TLS settings as Redis.
 */
typedef struct dq_sentinel_options {
    const char *master;        /* the master's name at the sentinels; NULL: none */
    const char *const *nodes;  /* "HOST:PORT" of each sentinel */
    size_t nnodes;
    const char *user;          /* the sentinels' ACL user, or NULL */
    const char *password;      /* the sentinels' password, or NULL */
} dq_sentinel_options;

/*
 * What a successful write promises.  LOCAL: the master has it (a failover
 * may lose the last writes; see docs/operations.md).  REPLICATED: every
 * call that writes (enqueue, enqueue_many, claim, ack, ack_many, fail,
 * release, renew, reap, cancel, requeue, purge, pause, resume, the
 * schedule calls, fsck) is followed by "WAIT 1 timeout" in the same round
 * trip (one WAIT after a pipeline), and succeeds only once a replica has
 * the write; a WAIT that times out fails the call with DQ_ERR_TIMEOUT
 * ("not replicated within N ms"), the write done on the master but not yet
 * on a replica (a claim's jobs are then not returned to the caller but
 * given back at once, as dq_release does: no attempt counted, due time
 * kept; the message says whether that worked).
 * Reads wait for nothing.  The wait for a write's reply is
 * command_timeout_ms plus replication_timeout_ms.
 */
typedef enum dq_durability {
    DQ_DURABILITY_LOCAL = 0,
    DQ_DURABILITY_REPLICATED = 1
} dq_durability;

#define DQ_DEFAULT_REPLICATION_TIMEOUT_MS 1000

typedef struct dq_options {
    const char *host;          /* default "127.0.0.1"; ignored with unix_path */
    int port;                  /* default 6379 */
    const char *unix_path;     /* unix socket; NULL for TCP */
    const char *user;          /* ACL user; NULL for the default user */
    const char *password;      /* NULL for none */
    int db;                    /* SELECT this database; default 0 */
    int connect_timeout_ms;    /* default 5000 */
    int command_timeout_ms;    /* default 5000; 0 waits for ever */
    int keepalive;             /* TCP keepalive on (1, default) or off (0) */
    const char *prefix;        /* key prefix, default "dq" */
    size_t max_payload;        /* bytes; default DQ_DEFAULT_MAX_PAYLOAD */
    dq_tls_options tls;        /* default: off, verify on */
    dq_sentinel_options sentinel; /* default: no sentinel */
    dq_durability durability;  /* default DQ_DURABILITY_LOCAL */
    int replication_timeout_ms; /* WAIT's timeout; default
                                   DQ_DEFAULT_REPLICATION_TIMEOUT_MS */
    /*
     * Redis Cluster: with `cluster` 1 the client reads the slot map
     * (CLUSTER SLOTS) from the seed nodes, "HOST:PORT" each (none: host and
     * port above are the one seed), keeps one connection per master it
     * needs, and follows MOVED, ASK, TRYAGAIN, CLUSTERDOWN and failovers.
     * A queue's keys share one hash slot, or one per partition (see
     * dq_queue_partitions); db must be 0, and Sentinel is not used.
     */
    int cluster;               /* default 0: one server (or Sentinel) */
    const char *const *nodes;  /* seed nodes; NULL: host:port */
    size_t nnodes;
    void *reserved[5];         /* zeroed by dq_options_init: room for later
                                  settings without changing the struct's size */
} dq_options;

/* Fill `opt` with the defaults above. */
void dq_options_init(dq_options *opt);

typedef struct dq_client dq_client;

/*
 * Connect, authenticate and select the database.  A broken connection is
 * made again at the next call.  A server that answers READONLY, MASTERDOWN
 * or LOADING (a failover left the connection on a demoted master, or the
 * server is loading) ran nothing: the call drops the connection, makes it
 * again after a jittered backoff from 100 ms and sends once more, for up
 * to connect_timeout_ms, then fails with DQ_ERR_CONNECT naming the reply.
 * Returns the client, or
 * NULL with the reason in `err` (at most `errlen` bytes, NUL-terminated) and,
 * when `status` is not NULL, the status (DQ_ERR_CONNECT, DQ_ERR_AUTH,
 * DQ_ERR_TIMEOUT, DQ_ERR_INVALID or DQ_ERR_NOMEM) in *status.
 */
dq_client *dq_connect(const dq_options *opt, char *err, size_t errlen,
                      dq_status *status);

/* Close the connection and free the client; NULL is ignored. */
void dq_close(dq_client *c);

/* The message of the client's last failure ("" after success). */
const char *dq_errmsg(const dq_client *c);

/* ---- Producing ---------------------------------------------------------- */

/*
 * Priorities: a job has a level 0..9, 0 the most urgent; high is 0, normal
 * (the default) 5, low 9.  Priority orders only jobs that are due: a job
 * never runs before its due time because of it.  Among due jobs a claim
 * takes the most urgent first, equal levels in due order; strictly, so a
 * permanent backlog of more urgent due jobs holds back the others.
 * dq_enqueue_req.priority is 0 for normal (so that a zeroed request keeps
 * its meaning) or DQ_PRIORITY(level).
 */
#define DQ_PRIORITY_LEVELS 10
#define DQ_PRIORITY_NORMAL_LEVEL 5
#define DQ_PRIORITY(level) ((level) + 1)
#define DQ_PRIORITY_HIGH DQ_PRIORITY(0)
#define DQ_PRIORITY_NORMAL DQ_PRIORITY(5)
#define DQ_PRIORITY_LOW DQ_PRIORITY(9)

/* The level (0..9) of "high", "normal", "low" or a digit 0..9, or -1 when
 * `s` is none of them. */
int dq_priority_parse(const char *s);

typedef struct dq_enqueue_req {
    const char *queue;      /* required */
    const char *type;       /* required: selects the handler */
    const char *id;         /* NULL or "" to generate one; may not be all
                               digits (that form is kept for generated ids) */
    const void *payload;    /* opaque bytes; may be NULL when payload_len 0 */
    size_t payload_len;
    int64_t delay_ms;       /* run after this delay, on Redis's clock
                               (0..DQ_MAX_AHEAD_MS) ... */
    int64_t at_ms;          /* ... or, when > 0, at this Unix time in ms
                               (at most DQ_MAX_AHEAD_MS from now) */
    int max_attempts;       /* 0: the consumer's default for the type */
    bool replace;           /* reschedule an existing job with this id */
    int priority;           /* 0: normal; else DQ_PRIORITY(0..9) (above);
                               anything else is DQ_ERR_INVALID */
    /* Expiry: a job not started by then is not run (checked when workers
     * claim and by the reaper; a retry after it is not run either). */
    int64_t expire_at;      /* Unix ms, after the due time; 0: ... */
    int64_t ttl_ms;         /* ... or, when > 0, this long after the due
                               time; both 0: the job never expires */
    int on_expire;          /* DQ_EXPIRE_DEAD (0): to the dead set with the
                               error "expired"; DQ_EXPIRE_DROP: deleted */
    /* Dedupe window (an id of the producer's only): for this long after
     * the job finished (acked, cancelled, dropped at its expiry; for a
     * dead job, from its death once it is purged), an enqueue of the same
     * id is refused with DQ_ERR_UNIQUE, or with unique_ok answered DQ_OK
     * and dq_enqueued.finished. */
    int64_t unique_for_ms;  /* 0: none */
    bool unique_ok;
    /* Debounce (dq_enqueue only, an id of the producer's, no delay, time,
     * replace, expiry or window): while the job of this id waits, the add
     * takes its place (this payload, type, limit and priority), due at
     * now + debounce_ms but never later than its first add + max_wait_ms;
     * while it runs, the add is kept as its next run, which takes its
     * place when that attempt ends; with no job, a new one due at
     * now + debounce_ms.  dq_enqueued says which. */
    int64_t debounce_ms;    /* 0: not debounced */
    int64_t max_wait_ms;    /* 0: no bound */
    int64_t reserved[6];    /* zero (a designated initializer does it):
                               room for later fields */
} dq_enqueue_req;

#define DQ_EXPIRE_DEAD 0
#define DQ_EXPIRE_DROP 1

typedef struct dq_enqueued {
    char id[DQ_ID_MAX + 1];
    int64_t due_ms;         /* Unix ms, server clock */
    bool replaced;          /* an existing job was rescheduled */
    bool finished;          /* nothing was added: the job of this id
                               finished within its dedupe window (with
                               unique_ok; DQ_ERR_UNIQUE without) ... */
    int64_t finished_ms;    /* ... at this time (dq_enqueue only) ... */
    int64_t unique_until_ms; /* ... and the window ends then */
    bool debounced;         /* a waiting job of this id took the add */
    bool next_run;          /* the job of this id runs: the add is its next
                               run (due_ms), after that attempt ends */
    bool cancelled;         /* with `finished`: the job of this id was
                               cancelled while it ran, and its id is kept
                               until that run's lease would have ended
                               (unique_until_ms; dq_enqueue only) */
} dq_enqueued;

/*
 * Schedule one job.  DQ_ERR_EXISTS when the id is taken and replace is
 * false; DQ_ERR_RUNNING when replace is asked for a job being processed.
 * `out` may be NULL.
 */
dq_status dq_enqueue(dq_client *c, const dq_enqueue_req *req, dq_enqueued *out);

/*
 * Schedule `n` jobs in one pipeline.  `results` (n entries, may be NULL)
 * receive each job's id; `statuses` (n entries, may be NULL) each job's
 * status.  Returns DQ_OK when every job was scheduled, otherwise the first
 * failure; jobs are independent, so a refused one does not stop the rest.
 * (Each job is checked here first, and only good ones are sent; the script
 * checks them again, on the server's clock, and refuses a whole call of
 * up to 1000 jobs on any bad one, writing nothing: those jobs then fail
 * with DQ_ERR_REDIS.  Only an absolute time right at the 100-year bound,
 * on a clock ahead of the server's, can pass here and fail there.)
 * When Redis cannot be reached the jobs sent get DQ_ERR_CONNECT (or what
 * else failed): none of them is known to be scheduled.  On a cluster that
 * holds for each master alone: the jobs of a partitioned queue whose
 * master answered have their own statuses, and those bound for a master
 * out of reach (after connect_timeout_ms; and any still being redirected
 * when the call gave up) get its failure, DQ_ERR_CONNECT as a rule.  Two
 * masters must answer before anything is sent: the one of a queue's own
 * slot ({Q}) when its partition count is read (at the first call on a new
 * connection), and the one of the registry (P:queues) when a queue is
 * registered (when the call's queue is not the last one registered): with
 * either down, every job of the call fails.
 */
dq_status dq_enqueue_many(dq_client *c, const dq_enqueue_req *reqs, size_t n,
                          dq_enqueued *results, dq_status *statuses);

/* Cancel a job that has not finished.  One still waiting is deleted.  One
 * running ends at once, cancelled (never retried, never dead), and the
 * daemon that runs it stops its handler within about a second (its
 * handler's cancel_grace at most; docs/protocol.md, "Cancelling a running
 * job"); its id stays taken until that run's lease would have ended.
 * DQ_ERR_DEAD (purge it instead) or DQ_ERR_NOTFOUND (no such job: it
 * finished, or was never added) say why not; of a cancel and the job's
 * own end, exactly one wins.  DQ_ERR_RUNNING comes only from a server
 * whose scripts predate cancelling a running job. */
dq_status dq_cancel(dq_client *c, const char *queue, const char *id);

/* Make a delayed job due now, keeping its priority and attempts (a
 * worker claims it next, after the jobs of more urgent levels that are
 * due).  DQ_ERR_RUNNING, DQ_ERR_DEAD (requeue it instead) or
 * DQ_ERR_NOTFOUND say why not; DQ_ERR_REDIS when its record cannot be
 * read. */
dq_status dq_run_now(dq_client *c, const char *queue, const char *id);

/* ---- Consuming ---------------------------------------------------------- */

typedef struct dq_job {
    char *id;
    char *type;
    void *payload;          /* NUL-terminated for convenience */
    size_t payload_len;
    int attempt;            /* 1 on the first run */
    int max_attempts;       /* 0: the consumer's default */
    int64_t due_ms;
    int64_t created_ms;
    int64_t fence;          /* present it to dq_ack / dq_fail */
    char *last_error;       /* "" when no attempt failed yet */
    int priority;           /* its level, 0 (most urgent) ..9; 5 normal */
} dq_job;

typedef struct dq_claim_result {
    dq_job *jobs;
    size_t n;
    int64_t now_ms;         /* server time of the claim */
    int64_t next_due_in_ms; /* 0: more are due; -1: nothing delayed */
} dq_claim_result;

/*
 * Take up to `max` (1..DQ_CLAIM_MAX) due jobs, each leased for `lease_ms`.
 * A paused queue (dq_pause) gives none, with next_due_in_ms -1.
 * Free the result with dq_claim_result_free, also after a failure.
 */
dq_status dq_claim(dq_client *c, const char *queue, int max, int64_t lease_ms,
                   dq_claim_result *out);
void dq_claim_result_free(dq_claim_result *r);

/* Finish a job that ran.  DQ_ERR_STALE when it is no longer held under
 * this fence (its lease expired); nothing is changed then. */
dq_status dq_ack(dq_client *c, const char *queue, const char *id, int64_t fence);

/* Finish `n` jobs in one call.  `acked` (n entries, may be NULL) receives
 * true for each job acked; returns DQ_OK unless the call itself failed. */
dq_status dq_ack_many(dq_client *c, const char *queue, const dq_job *jobs,
                      size_t n, bool *acked);

/* Give back `n` claimed jobs that were not started: they return to the
 * queue at their due time without counting the attempt.  *released (may be
 * NULL) counts those still held under their fence. */
dq_status dq_release(dq_client *c, const char *queue, const dq_job *jobs,
                     size_t n, size_t *released);

typedef struct dq_retry_policy {
    int64_t base_ms;        /* first retry after about this long (1000) */
    int64_t cap_ms;         /* no retry waits longer (3600000), whether
                               the backoff or dq_fail's retry_delay_ms */
    double jitter;          /* 0..1: shorten each wait by up to this (0.2) */
    int default_max_attempts; /* for jobs enqueued without a limit (5) */
} dq_retry_policy;

void dq_retry_policy_init(dq_retry_policy *p);

typedef enum dq_fail_mode {
    DQ_FAIL_RETRY,          /* retry unless the attempts are used up */
    DQ_FAIL_DEAD            /* no more attempts: dead now */
} dq_fail_mode;

typedef struct dq_fail_result {
    bool dead;              /* true: moved to the dead set */
    int64_t at_ms;          /* the retry's due time, or the time of death */
} dq_fail_result;

/*
 * Record a failed attempt with its error text.  With DQ_FAIL_RETRY the job
 * comes back after `retry_delay_ms` (but never later than the policy's
 * cap_ms), or after the policy's backoff when it is negative, unless its
 * attempts are used up.  DQ_ERR_STALE as for ack.  A record that cannot be
 * read is buried as it is ("unreadable record").
 */
dq_status dq_fail(dq_client *c, const char *queue, const char *id,
                  int64_t fence, const char *error, dq_fail_mode mode,
                  int64_t retry_delay_ms, const dq_retry_policy *policy,
                  dq_fail_result *out);

typedef struct dq_reap_result {
    size_t retried;
    size_t dead;
    int64_t next_in_ms;     /* 0: more have expired; -1: nothing processing
                               (and no job with an expiry) */
    size_t expired;         /* jobs past their expiry, unstarted: to dead
                               (error "expired") or dropped */
} dq_reap_result;

/* Return up to `batch` jobs whose lease expired to the queue, or bury them
 * when their attempts are used up (error "lease expired"); and end up to
 * `batch` jobs that reached their expiry unstarted (dq_enqueue_req). */
dq_status dq_reap(dq_client *c, const char *queue, int batch,
                  const dq_retry_policy *policy, dq_reap_result *out);

/* ---- Operating ---------------------------------------------------------- */

typedef struct dq_stats {
    int64_t delayed;        /* waiting, not yet due */
    int64_t due;            /* due, waiting for a worker */
    int64_t processing;
    int64_t expired;        /* processing past their lease */
    int64_t dead;
    int64_t next_due_in_ms; /* -1 when nothing is delayed */
    int64_t now_ms;
    int64_t due_by_priority[DQ_PRIORITY_LEVELS]; /* `due`, per level 0..9 */
    int64_t jobs_expired;   /* jobs that reached their expiry unstarted,
                               ever (a counter kept in Redis) */
    int64_t jobs_cancelled; /* jobs cancelled, waiting or running, ever
                               (a counter kept in Redis) */
} dq_stats;

dq_status dq_stats_get(dq_client *c, const char *queue, dq_stats *out);

/* ---- Partitions ----------------------------------------------------------- */

/*
 * A queue may be split into N partitions (1..DQ_PARTITIONS_MAX), each with
 * its own keys (docs/protocol.md), so that Redis Cluster spreads one queue
 * over its masters.  N is stored in Redis with the queue; every call of
 * this library finds a job's partition from its id, spreads jobs without
 * an id over the partitions in turn, and claims from all of them.  Order
 * among due jobs (by priority, then due time) holds within a partition.
 * A client reads N once per queue and connection: change it only while no
 * producer or consumer is running.
 */
#define DQ_PARTITIONS_MAX 256

/* The stored partition count of `queue`, read now: 1 for a queue that was
 * never partitioned.  DQ_ERR_REDIS when the stored value is not a count. */
dq_status dq_queue_partitions(dq_client *c, const char *queue, unsigned *n);

/*
 * Store `n` (1..DQ_PARTITIONS_MAX) as the partition count of `queue`.
 * Setting the count it has changes nothing.  A change is refused with
 * DQ_ERR_EXISTS, nothing written, when any partition of the stored count
 * holds jobs (delayed, due, processing or dead), and when n > 1 while the
 * unpartitioned queue holds jobs: "drain it first".  DQ_ERR_STALE when
 * another caller changed the count between this call's read and its
 * write (compare-and-set; nothing written).  Recurring schedules are not
 * moved: a change between 1 and more partitions (which moves their home)
 * is refused with DQ_ERR_EXISTS while the queue has any; remove them
 * before the change and add them again after.
 */
dq_status dq_queue_set_partitions(dq_client *c, const char *queue, unsigned n);

/* dq_stats_get of partition `part` (0..N-1) alone; DQ_ERR_INVALID when the
 * queue has no such partition.  dq_stats_get sums the partitions. */
dq_status dq_stats_partition(dq_client *c, const char *queue, unsigned part,
                             dq_stats *out);

/* The queues that have been enqueued to, sorted; free with dq_strv_free. */
dq_status dq_queues(dq_client *c, char ***names, size_t *n);
void dq_strv_free(char **v, size_t n);

typedef enum dq_state {
    DQ_STATE_DELAYED,
    DQ_STATE_PROCESSING,
    DQ_STATE_DEAD,
    DQ_STATE_ORPHAN,        /* a record in no set: report it */
    DQ_STATE_UNREADABLE,    /* a record that cannot be read: dq_show fills
                               what could be, and last_error says why and
                               which set holds it */
    DQ_STATE_DONE,          /* finished within its dedupe window: state_ms
                               is when, unique_until_ms when the id is free */
    DQ_STATE_CANCELLED      /* cancelled while it ran: state_ms is when,
                               job.fence the run that was stopped,
                               unique_until_ms when the id is free (the
                               run's lease end, or its window's if later) */
} dq_state;

/* Whether all that is left of a job is its tombstone, which keeps its id
 * taken for a while: DQ_STATE_DONE or DQ_STATE_CANCELLED (the other
 * fields of dq_job_info are then empty, but for a cancelled job's fence). */
static inline int dq_state_is_finished(dq_state s)
{
    return s == DQ_STATE_DONE || s == DQ_STATE_CANCELLED;
}

const char *dq_state_str(dq_state s);

typedef struct dq_job_info {
    dq_job job;             /* attempt = attempts made so far */
    dq_state state;
    int64_t state_ms;       /* due, lease deadline or time of death */
    int64_t now_ms;
    int64_t expire_at_ms;   /* when it expires unstarted; 0: never (or dead) */
    int on_expire;          /* DQ_EXPIRE_DEAD or DQ_EXPIRE_DROP */
    int64_t unique_ms;      /* its dedupe window; 0: none */
    int64_t unique_until_ms; /* DQ_STATE_DONE, _CANCELLED: when the id is
                                free again */
} dq_job_info;

dq_status dq_show(dq_client *c, const char *queue, const char *id,
                  dq_job_info *out);
void dq_job_info_free(dq_job_info *info);

typedef struct dq_dead_entry {
    char *id;
    char *type;
    char *last_error;
    int attempts;
    int64_t died_ms;
    size_t payload_len;
} dq_dead_entry;

typedef struct dq_dead_page {
    dq_dead_entry *entries;
    size_t n;
    int64_t total;          /* dead jobs in the queue */
} dq_dead_page;

/* Dead jobs from `offset` (oldest death first), at most `count` (1..10000).
 * A record that cannot be read does not fail the page: its entry holds
 * what could be read ("" or 0 for the rest), and its last_error says why
 * it is unreadable ("unreadable record: ..."). */
dq_status dq_dead_list(dq_client *c, const char *queue, int64_t offset,
                       int count, dq_dead_page *out);
/* Whether entry i of a page is an unreadable record (false when i is out
 * of range).  A function, not a field: a field would change the size of
 * dq_dead_entry, and with it the array stride, under built programs. */
bool dq_dead_page_unreadable(const dq_dead_page *p, size_t i);
void dq_dead_page_free(dq_dead_page *p);

/* Requeue one dead job (due now, attempts reset); DQ_ERR_NOTFOUND when it
 * is not dead. */
dq_status dq_requeue(dq_client *c, const char *queue, const char *id);
/* Requeue every dead job; *moved (may be NULL) counts them. */
dq_status dq_requeue_all(dq_client *c, const char *queue, int64_t *moved);
/* Delete one dead job; DQ_ERR_NOTFOUND when it is not dead. */
dq_status dq_purge(dq_client *c, const char *queue, const char *id);
/* Delete every dead job; *deleted (may be NULL) counts them. */
dq_status dq_purge_all(dq_client *c, const char *queue, int64_t *deleted);

/* ---- Pausing ------------------------------------------------------------ */

/*
 * Pause `queue`: from the moment the call returns no claim hands out a job
 * (dq_claim returns none, next_due_in_ms -1), on every host using this
 * Redis; delayqd's workers stop starting jobs within about 100 ms, jobs
 * already running finish.  Enqueue, cancel, show, the dead-letter calls and
 * the reaper go on as usual.  The state is kept in Redis until dq_resume.
 * A queue that has never been used may be paused (its workers start
 * paused).  *since_ms (may be NULL) receives when the pause began, on the
 * server's clock: an earlier time when the queue was paused already.
 */
dq_status dq_pause(dq_client *c, const char *queue, int64_t *since_ms);

/* Undo dq_pause: claims hand out due jobs again at once; lateness is still
 * measured from each job's due time.  *since_ms (may be NULL) receives when
 * the pause had begun, -1 when the queue was not paused (nothing changes). */
dq_status dq_resume(dq_client *c, const char *queue, int64_t *since_ms);

/* Whether `queue` is paused: *since_ms receives when the pause began, on
 * the server's clock, or -1 when it is not paused. */
dq_status dq_paused(dq_client *c, const char *queue, int64_t *since_ms);

/* ---- Checking ----------------------------------------------------------- */

typedef enum dq_fsck_kind {
    DQ_FSCK_RECORD,         /* a record in none of delayed, processing, dead */
    DQ_FSCK_MEMBER,         /* a member of delayed, processing or dead
                               without a record */
    DQ_FSCK_LEASE,          /* a field of the lease hash without a record */
    DQ_FSCK_WRONG_TYPE      /* a key of the wrong type: never repaired */
} dq_fsck_kind;

/* "record", "member", "lease" or "type". */
const char *dq_fsck_kind_str(dq_fsck_kind k);

typedef struct dq_fsck_finding {
    dq_fsck_kind kind;
    bool repaired;          /* dead (a record) or removed (the rest) */
    char *key;              /* the record hash, the set or the lease hash it
                               is in; or the key of the wrong type */
    char *id;               /* the job id; DQ_FSCK_WRONG_TYPE: the key's type */
    char *expected;         /* DQ_FSCK_WRONG_TYPE: the type it should have;
                               otherwise "" */
} dq_fsck_finding;

#define DQ_FSCK_FINDINGS_MAX 1000 /* findings kept (every wrong-type key is) */
#define DQ_FSCK_COUNT 100   /* elements examined per script call, by default */

typedef struct dq_fsck_result {
    int64_t scanned;        /* records, set members and lease fields examined */
    int64_t records;        /* records in no set */
    int64_t members;        /* set members without a record */
    int64_t leases;         /* lease fields without a record */
    int64_t wrong_types;    /* keys of the wrong type, each counted once */
    int64_t repaired;       /* of records + members + leases */
    int64_t claim_dropped;  /* ids claims dropped for a missing record, in
                               all (the queue's meta field orphans_removed) */
    dq_fsck_finding *findings; /* in the order found: every wrong-type key,
                                  and the first DQ_FSCK_FINDINGS_MAX others */
    size_t n;
    size_t calls;           /* script calls the pass took */
} dq_fsck_result;

/*
 * Check a queue's keys, in script calls that each examine about `count`
 * elements (0: DQ_FSCK_COUNT; at most 1000), so that Redis is never held
 * for long.  With `repair`, records in no set go to the dead set with the
 * error "orphan record" and set members and lease fields without a record
 * are removed; keys of the wrong type are only reported.  Each finding is
 * judged and repaired in one atomic call: a job moving between sets is
 * never taken for an orphan.  Returns DQ_OK whatever was found (see the
 * counts); free the result with dq_fsck_result_free, also after a failure.
 */
dq_status dq_fsck(dq_client *c, const char *queue, bool repair, int count,
                  dq_fsck_result *out);
void dq_fsck_result_free(dq_fsck_result *r);

/* ---- Recurring schedules -------------------------------------------------- */

/* What a schedule does about ticks missed while no delayqd served its
 * queue (more than DQ_SCHEDULE_GRACE_MS late when a daemon next looks). */
typedef enum dq_catch_up {
    DQ_CATCH_UP_ONE = 0,    /* one job for the whole missed period (default) */
    DQ_CATCH_UP_ALL,        /* a job for each missed tick, oldest first, at
                               most DQ_SCHEDULE_CATCH_UP_MAX */
    DQ_CATCH_UP_NONE        /* none: the schedule resumes at its next tick */
} dq_catch_up;

#define DQ_SCHEDULE_NAME_MAX 128
#define DQ_SCHEDULE_GRACE_MS 30000
#define DQ_SCHEDULE_CATCH_UP_MAX 1000

/* "one", "all", "none"; and back (-1 for anything else). */
const char *dq_catch_up_str(dq_catch_up c);
int dq_catch_up_parse(const char *s, dq_catch_up *out);

typedef struct dq_schedule_req {
    const char *queue;      /* required */
    const char *name;       /* required: 1..128 printable bytes, no spaces,
                               no '@' */
    const char *type;       /* required: the jobs' type */
    const char *expr;       /* "*\/5 * * * *", "@every 90s", "@daily" ...
                               (delayq(1) describes the syntax) */
    const char *tz;         /* an IANA zone of the system's tzdata; NULL
                               or "" for UTC */
    const void *payload;    /* each job's payload */
    size_t payload_len;
    int max_attempts;       /* each job's; 0: the consumer's default */
    dq_catch_up catch_up;
    bool replace;           /* overwrite a schedule of the same name */
} dq_schedule_req;

/*
 * Store a recurring schedule: from its next tick on, the daemons serving
 * the queue make one job per tick, with the id NAME@TICK
 * ("nightly@2026-11-23T00:00:00Z"), due at the tick.  DQ_ERR_INVALID for
 * a bad expression or zone (the message names the field and the reason);
 * DQ_ERR_EXISTS when the name is taken and replace is false.  *next_ms
 * (may be NULL) receives the first tick, in Unix ms.
 */
dq_status dq_schedule_add(dq_client *c, const dq_schedule_req *req, int64_t *next_ms);

/* Delete a schedule: no tick fires after this returns (jobs it made
 * already stay).  DQ_ERR_NOTFOUND when there is none of that name. */
dq_status dq_schedule_remove(dq_client *c, const char *queue, const char *name);

/* Pause a schedule without removing it: no tick fires after this returns,
 * and the jobs it made ahead of ticks not yet due are deleted (as remove
 * does); its definition stays (an add or the config file's declaration
 * keeps it paused, with *next_ms -1).  *since_ms (may be NULL) receives
 * when it was paused, the earlier time when it was paused already.
 * DQ_ERR_NOTFOUND when there is no such schedule. */
dq_status dq_schedule_pause(dq_client *c, const char *queue, const char *name,
                            int64_t *since_ms);

/* Resume a paused schedule from its next tick after now (the ticks it
 * missed while paused are not made up); *next_ms (may be NULL) receives
 * that tick.  A schedule that is not paused is left as it is (*next_ms its
 * next tick).  DQ_ERR_NOTFOUND when there is none; DQ_ERR_INVALID when its
 * stored definition cannot be read (remove it and add it again). */
dq_status dq_schedule_resume(dq_client *c, const char *queue, const char *name,
                             int64_t *next_ms);

/* Make one job of the schedule now, outside its ticks (id
 * NAME@now-2026-11-23T10:05:00.123Z); the ticks are not changed.  `out`
 * may be NULL.  DQ_ERR_NOTFOUND when there is no such schedule. */
dq_status dq_schedule_run_now(dq_client *c, const char *queue, const char *name,
                              dq_enqueued *out);

typedef struct dq_schedule_info {
    char *name;
    char *expr;
    char *tz;               /* "" for UTC */
    char *type;
    void *payload;          /* NUL-terminated for convenience */
    size_t payload_len;
    int max_attempts;
    dq_catch_up catch_up;
    int64_t next_ms;        /* the next tick, Unix ms; -1 while paused */
    bool readable;          /* false: the stored definition cannot be read
                               (only name and next_ms are filled) */
    int64_t paused_since_ms; /* when it was paused (Unix ms); -1: it is not */
} dq_schedule_info;

typedef struct dq_schedule_list {
    dq_schedule_info *items; /* soonest next tick first */
    size_t n;
    int64_t now_ms;
} dq_schedule_list;

/* A queue's schedules (at most 10000).  Free with dq_schedule_list_free,
 * also after a failure. */
dq_status dq_schedule_list_get(dq_client *c, const char *queue, dq_schedule_list *out);
void dq_schedule_list_free(dq_schedule_list *l);

/* Server time in Unix ms (Redis TIME). */
dq_status dq_server_time(dq_client *c, int64_t *now_ms);

#ifdef __cplusplus
}
#endif
#endif /* DELAYQ_CLIENT_H */
