/*
 * The delayq protocol: how each script's arguments are laid out and how its
 * reply is read.  Shared by the blocking client (libdelayq) and by anything
 * that talks to Redis asynchronously, so the layout lives in one place.
 *
 * Reply readers return DQ_OK, or DQ_ERR_REDIS when the reply does not have
 * the shape the script returns (wrong script version on the server), or the
 * status the script reported (not found, stale, ...).
 */
#ifndef DQ_PROTO_H
#define DQ_PROTO_H

#include <delayq/client.h>
#include <hiredis/hiredis.h>

#include "lib/cmd.h"

/* Clamp the claim batch into 1..DQ_CLAIM_MAX. */
int proto_claim_batch(int max);

/* `nparts` > 1: the queue is partitioned and `k` are partition `part`'s
 * keys (generated ids are then seq * nparts + part); 1: as before. */
void proto_enqueue_cmd(struct cmd *c, const struct queue_keys *k,
                       const dq_enqueue_req *req, unsigned nparts, unsigned part);
dq_status proto_enqueue_reply(const redisReply *r, dq_enqueued *out);

/* enqueue_many: `n` jobs of one queue (reqs[idx[0..n-1]]) in one call,
 * to partition `part` of `nparts` (as proto_enqueue_cmd). */
void proto_enqueue_many_cmd(struct cmd *c, const struct queue_keys *k,
                            const dq_enqueue_req *reqs, const size_t *idx, size_t n,
                            unsigned nparts, unsigned part);
/* Each job's result (out[0..n-1]) and status (st[0..n-1]) from the
 * enqueue_many reply to the jobs sent as reqs[idx[0..n-1]].  DQ_ERR_REDIS
 * when the reply is not one. */
dq_status proto_enqueue_many_reply(const redisReply *r, const dq_enqueue_req *reqs,
                                   const size_t *idx, size_t n, unsigned nparts,
                                   unsigned part, dq_enqueued *out, dq_status *st);

/* `owner` (NULL: none) names the claiming worker, so that its claim can
 * be recovered if it dies before reading the reply (proto_recover_cmd). */
void proto_claim_cmd(struct cmd *c, const struct queue_keys *k, int max,
                     int64_t lease_ms, const char *owner);
dq_status proto_claim_reply(const redisReply *r, dq_claim_result *out);
/* Whether a claim's reply says the queue is paused (it then has no jobs;
 * proto_claim_reply reads it as an empty claim, next_due_in_ms -1). */
bool proto_claim_paused(const redisReply *r);

/* release: give back claimed jobs that were not started. */
void proto_release_cmd(struct cmd *c, const struct queue_keys *k,
                       const dq_job *jobs, size_t n);

/* renew: extend the leases of `n` claimed jobs by lease_ms from now.
 * The reply gives the server's time and, in held[i], whether job i is
 * still held (false: its lease is lost; it must not run). */
void proto_renew_cmd(struct cmd *c, const struct queue_keys *k, int64_t lease_ms,
                     const dq_job *jobs, size_t n);
dq_status proto_renew_reply(const redisReply *r, size_t n, int64_t *now_ms, bool *held);

/* recover: give back the jobs still held under the fences of `owner`'s
 * last claim (a worker that died with a claim on its way). */
void proto_recover_cmd(struct cmd *c, const struct queue_keys *k, const char *owner);

void proto_ack_cmd(struct cmd *c, const struct queue_keys *k,
                   const dq_job *jobs, size_t n);
dq_status proto_ack_reply(const redisReply *r, size_t n, bool *acked);

/* `seed` feeds the script's jitter (Lua's own random is not random). */
void proto_fail_cmd(struct cmd *c, const struct queue_keys *k, const char *id,
                    int64_t fence, const char *error, dq_fail_mode mode,
                    int64_t retry_delay_ms, const dq_retry_policy *p,
                    uint32_t seed);
dq_status proto_fail_reply(const redisReply *r, dq_fail_result *out);

void proto_reap_cmd(struct cmd *c, const struct queue_keys *k, int batch,
                    const dq_retry_policy *p, uint32_t seed);
dq_status proto_reap_reply(const redisReply *r, dq_reap_result *out);

/* cancel: one delayed job deleted.  The reply: DQ_OK, or DQ_ERR_RUNNING,
 * DQ_ERR_DEAD, DQ_ERR_NOTFOUND. */
void proto_cancel_cmd(struct cmd *c, const struct queue_keys *k, const char *id);
dq_status proto_cancel_reply(const redisReply *r);

/* run_now: one delayed job due now (priority kept).  The reply as
 * cancel's. */
void proto_run_now_cmd(struct cmd *c, const struct queue_keys *k, const char *id);
dq_status proto_run_now_reply(const redisReply *r);
dq_status proto_stats_reply(const redisReply *r, dq_stats *out);
/* The stats reply's paused_since_ms: when the queue was paused, -1 when
 * it is not (nor said: a reply of an older script). */
int64_t proto_stats_paused(const redisReply *r);
/* Add one partition's figures into a queue's `sum` (counts and counters
 * summed; the soonest next due time; the latest server time). */
void proto_stats_add(dq_stats *sum, const dq_stats *one);
/* The stats reply's oldest_due_ms: the due time of the job due longest,
 * -1 when none is due (nor said: a reply of an older script). */
int64_t proto_stats_oldest_due(const redisReply *r);

/* pause, resume (with the wake channel) or pause_state (no argument),
 * by `s`.  Each replies {now_ms, since_ms, ...}: since_ms is when the
 * queue's pause began (pause: the first pause's, if it was paused
 * already), -1 when it is (resume: was) not paused. */
void proto_pause_cmd(struct cmd *c, const struct queue_keys *k, enum dq_script_id s);
dq_status proto_pause_reply(const redisReply *r, int64_t *now_ms, int64_t *since_ms);
/* show of job `id`; `raw` asks for a waiting job's record undecoded (the
 * producers' call: the script's work is then its commands).  The reply to
 * it may be a record this reading cannot vouch for: then *again is set,
 * and the caller sends the call again without `raw`, which the script
 * answers in full.  A caller that never sends `raw` passes NULL. */
void proto_show_cmd(struct cmd *c, const struct queue_keys *k, const char *id, bool raw);
dq_status proto_show_reply(const redisReply *r, dq_job_info *out, bool *again);
void proto_dead_list_cmd(struct cmd *c, const struct queue_keys *k, int64_t offset,
                         int count);
dq_status proto_dead_list_reply(const redisReply *r, dq_dead_page *out);
/* Pages merged from several (the dead sets of a partitioned queue): an
 * empty page with room for `cap` entries; entry i of `from` moved to the
 * end of `to` (its strings now owned by `to`, its place in `from` left
 * empty); once filled, proto_dead_page_seal(to, cap) makes it a page as
 * dq_dead_page_unreadable and dq_dead_page_free read it. */
dq_status proto_dead_page_alloc(dq_dead_page *p, size_t cap);
void proto_dead_entry_move(dq_dead_page *to, size_t cap, dq_dead_page *from, size_t i);
void proto_dead_page_seal(dq_dead_page *p, size_t cap);
/* requeue (DQ_SCRIPT_REQUEUE, with the wake channel) or purge
 * (DQ_SCRIPT_PURGE) of dead job `id`, or of the oldest `batch` dead jobs
 * when `id` is NULL. */
void proto_dead_cmd(struct cmd *c, const struct queue_keys *k, enum dq_script_id s,
                    const char *id, int batch);
/* requeue and purge: {moved, remaining}. */
dq_status proto_count_reply(const redisReply *r, int64_t *moved,
                            int64_t *remaining);

/* fsck: one step from `cursor` ("0" to start), examining about `count`
 * elements. */
void proto_fsck_cmd(struct cmd *c, const struct queue_keys *k, const char *cursor,
                    int count, bool repair);
/* Add one fsck reply to `acc` (counts added, findings appended up to
 * DQ_FSCK_FINDINGS_MAX, a wrong-type key already in acc not counted
 * again, claim_dropped replaced) and copy the next cursor into `cursor`
 * ("0": the pass is done).  DQ_ERR_REDIS when the reply is not one;
 * DQ_ERR_NOMEM. */
dq_status proto_fsck_reply(const redisReply *r, bool repair, dq_fsck_result *acc,
                           char *cursor, size_t cursorlen);

/*
 * browse: a page of one list ("delayed", "processing" or "dead") in list
 * order, for the dashboard.  `mode`: PROTO_BROWSE_RECORDS (the entries
 * with their records from `offset`, at most `count`), PROTO_BROWSE_IDS
 * (the same entries, id and time only: the first step of a merge of
 * partitions) or PROTO_BROWSE_THESE (the records of `ids`, those still in
 * the list).  With `type` (not NULL), only entries of that type among the
 * first `examine` of the list.
 */
enum proto_browse_mode { PROTO_BROWSE_RECORDS, PROTO_BROWSE_IDS, PROTO_BROWSE_THESE };
void proto_browse_cmd(struct cmd *c, const struct queue_keys *k, const char *which,
                      int64_t offset, int count, const char *type, int examine,
                      enum proto_browse_mode mode, const char *const *ids, size_t nids);

/* One entry of a browse reply; the strings are borrowed from the reply
 * (NUL-terminated).  In PROTO_BROWSE_IDS mode only id and at_ms are set. */
struct proto_browse_item {
    const char *id;
    int64_t at_ms;
    const char *type;
    int attempts;
    int max_attempts;
    int priority;
    int64_t created_ms;
    size_t payload_len;
    const char *last_error;
    const char *unreadable;     /* "" when the record reads */
};

/* The head of a browse reply, and its number of entries in *n.
 * DQ_ERR_REDIS when it is not one. */
dq_status proto_browse_reply(const redisReply *r, enum proto_browse_mode mode,
                             int64_t *now_ms, int64_t *total, int64_t *matched,
                             size_t *n);
/* Entry i (< *n of proto_browse_reply) of a browse reply. */
void proto_browse_item(const redisReply *r, enum proto_browse_mode mode, size_t i,
                       struct proto_browse_item *out);

void proto_job_free(dq_job *j);

/* Elements of a script's array reply `r` (i < r->elements): an integer
 * (or a decimal string; 0 otherwise); whether it is the string `s`; a
 * NUL-terminated copy (binary-safe, length in *len when not NULL; NULL
 * when out of memory). */
int64_t proto_elem_int(const redisReply *r, size_t i);
int proto_elem_is(const redisReply *r, size_t i, const char *s);
char *proto_elem_dup(const redisReply *r, size_t i, size_t *len);

#endif
