/*
 * A worker's claims: the claim when idle, the claim sent ahead with the
 * reports of a full batch, the give-back of a claim no replica confirmed,
 * and a paused worker's look at the pause state instead of a claim.
 */
#include "daemon/log.h"
#include "daemon/signals.h"
#include "daemon/worker/worker_int.h"

/* Learn the server's clock from a claim's reply.  The script read TIME
 * (truncated to the ms) somewhere between sending and receiving, so take
 * the middle of both, and the middle of that ms: the estimate is then off
 * by less than half the round trip, where the ms alone would be off by up
 * to a whole one. */
static void learn_server_clock(struct worker *w, int64_t server_ms)
{
    int64_t mid = (w->claim_sent_us + slots_now_us()) / 2;
    w->server_offset_us = server_ms * 1000 + 500 - mid;
}

/* Read a claim's reply into *out.  A reply with more jobs than the claim
 * asked for is refused: the batch's buffers (worker_setup) hold q->batch
 * jobs.  Its jobs' leases then run out and the reaper gives them back. */
static dq_status read_claim(const struct worker *w, const redisReply *reply,
                            dq_claim_result *out)
{
    dq_status st = proto_claim_reply(reply, out);
    if (st == DQ_OK && out->n > (size_t)w->q->batch) {
        log_err("queue=%s: a claim for %d jobs returned %zu", w->q->name, w->q->batch,
                out->n);
        st = DQ_ERR_REDIS;
    }
    return st;
}

/* Tell the supervisor (/healthz) whether claims go through: a demoted
 * Redis refuses each one (READONLY, which rconn turns into a lost
 * connection) while it still answers reads. */
static void note_claim_outcome(struct worker *w, const redisReply *reply)
{
    if (!reply)
        slot_claims_failed(w->slot, rconn_last_failure(w->cmd));
    else if (reply->type == REDIS_REPLY_ERROR)
        slot_claims_failed(w->slot, reply->str);
    else
        slot_claims_ok(w->slot);
}

/* Tell the sweep (qparts.h) what the claim of `res` found. */
static void note_partition_claimed(struct worker *w, unsigned part, const dq_claim_result *res)
{
    if (qparts_claimed(&w->parts, res->next_due_in_ms == 0,
                       res->next_due_in_ms < 0 ? -1 : res->now_ms + res->next_due_in_ms))
        log_info("queue=%s: partition %u answers again", w->q->name, part);
}

/* How a claim went out (send_claim). */
enum claim_sent {
    CLAIM_SENT,
    CLAIM_NONE_REACHABLE,   /* every partition to ask is out of reach */
    CLAIM_NOT_SENT          /* the connection is down (or out of memory) */
};

/* The partition qparts_next_claim named cannot be asked now (its master
 * is down, or its claim came back without a reply while the others'
 * masters answer): the sweep goes on without it, and asks it again in
 * UNREACHABLE_RETRY_MS.  Logged when it goes out of reach, not at each
 * retry. */
static void skip_partition(struct worker *w, unsigned part)
{
    if (qparts_out_of_reach(&w->parts, server_now(w) + UNREACHABLE_RETRY_MS))
        log_warn("queue=%s: partition %u is out of reach (%s); claiming from the others",
                 w->q->name, part, rconn_last_failure(w->cmd));
}

/* A claim that was sent ahead came back before the reports of the batch
 * before were all settled (one is being retried after an error, or the
 * connection was lost): keep its jobs for worker_finish_batch. */
static void keep_claim_ahead(struct worker *w, redisReply *reply)
{
    note_claim_outcome(w, reply);
    if (reply && read_claim(w, reply, &w->next) == DQ_OK) {
        worker_observe_pause(w, proto_claim_paused(reply), w->next.now_ms, w->claim_sent_us);
        learn_server_clock(w, w->next.now_ms);
        slot_table_publish(w->slot, w->table ^ 1, w->claim_part, w->next.jobs, w->next.n);
        w->next_part = w->claim_part;
        note_partition_claimed(w, w->claim_part, &w->next);
        w->ahead = AHEAD_READY;
    } else {
        dq_claim_result_free(&w->next);
        if (reply && reply->type != REDIS_REPLY_ERROR)
            log_err("queue=%s: unexpected reply to claim", w->q->name);
        if (!reply && rconn_is_up(w->cmd))
            skip_partition(w, w->claim_part);
    }
}

static void on_recover_reply(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    if (reply && reply->type == REDIS_REPLY_INTEGER && reply->integer > 0)
        log_info("queue=%s: gave back %lld job%s of a claim no replica confirmed",
                 w->q->name, reply->integer, reply->integer == 1 ? "" : "s");
}

/*
 * A claim that no replica confirmed in time (durability "replicated"):
 * its jobs are leased on the master only.  A failover now would make them
 * due again on the promoted replica, where another worker would run them,
 * so this worker must not: it gives them back at once with recover (no
 * attempt counted, due time kept, as a release) rather than leave them to
 * the reaper, which counts an attempt per expired lease, so that a replica
 * down for long would send every job to the dead letters.  The recover may
 * not be replicated either: whichever server ends up the master has the
 * jobs due.  If the recover is lost with the connection, the leases expire
 * and the reaper gives the jobs back, an attempt counted.
 */
static void give_back_unreplicated(struct worker *w)
{
    struct cmd cmd;
    cmd_init(&cmd);
    proto_recover_cmd(&cmd, qparts_keys(&w->parts, w->claim_part), w->owner);
    if (rconn_send(w->cmd, &cmd, DQ_SCRIPT_RECOVER, on_recover_reply, w) < 0)
        log_warn("queue=%s: a claim was not replicated and its jobs cannot be given back "
                 "now; the reaper returns them when their leases expire", w->q->name);
    cmd_free(&cmd);
}

static void on_claim(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    int was_ahead = w->ahead == AHEAD_SENT;
    w->ahead = AHEAD_NONE;
    if (rconn_is_not_replicated(reply))
        give_back_unreplicated(w);
    if (was_ahead && w->state == W_REPORTING) {
        keep_claim_ahead(w, reply);
        w->slot->claim_in_flight = 0;
        return;
    }
    w->state = W_IDLE;
    note_claim_outcome(w, reply);
    if (!reply) {
        w->slot->claim_in_flight = 0;
        /* The connection lost: on_cmd_up claims again.  Only this
         * partition's master lost (isolated masters, worker_setup): the
         * others go on now. */
        if (rconn_is_up(w->cmd)) {
            skip_partition(w, w->claim_part);
            worker_drive(w);
        }
        return;
    }
    dq_status st = read_claim(w, reply, &w->batch);
    if (st == DQ_OK) {
        slot_table_publish(w->slot, w->table, w->claim_part, w->batch.jobs, w->batch.n);
        w->batch_part = w->claim_part;
        note_partition_claimed(w, w->claim_part, &w->batch);
    }
    w->slot->claim_in_flight = 0;
    if (st != DQ_OK) {
        dq_claim_result_free(&w->batch);
        if (reply->type != REDIS_REPLY_ERROR)
            log_err("queue=%s: unexpected reply to claim", w->q->name);
        worker_sleep_for(w, RETRY_AFTER_ERROR_MS);
        return;
    }
    worker_observe_pause(w, proto_claim_paused(reply), w->batch.now_ms, w->claim_sent_us);
    learn_server_clock(w, w->batch.now_ms);
    worker_start_batch(w);
}

/* The next partition of the sweep whose master is up (rconn_key_is_up:
 * always so but in cluster mode); -1 when the sweep ended on partitions
 * out of reach only.  Each one skipped is asked again later. */
static int next_reachable(struct worker *w)
{
    for (unsigned tries = 0; tries <= 2 * w->parts.n; tries++) {
        unsigned part = qparts_next_claim(&w->parts, server_now(w));
        if (rconn_key_is_up(w->cmd, qparts_keys(&w->parts, part)->key[0]))
            return (int)part;
        skip_partition(w, part);
        if (!qparts_claim_now(&w->parts))
            return -1;
    }
    return -1;
}

/* Send a claim: CLAIM_SENT when it is on its way, CLAIM_NONE_REACHABLE
 * when every partition that may have a job due is out of reach (sleep
 * until one may be asked), CLAIM_NOT_SENT when the connection is down. */
static enum claim_sent send_claim(struct worker *w)
{
    if (!rconn_is_up(w->cmd))
        return CLAIM_NOT_SENT;
    int part = next_reachable(w);
    if (part < 0)
        return CLAIM_NONE_REACHABLE;
    struct cmd cmd;
    cmd_init(&cmd);
    w->claim_part = (unsigned)part;
    proto_claim_cmd(&cmd, qparts_keys(&w->parts, w->claim_part), w->q->batch, w->q->lease_ms,
                    w->owner);
    w->claim_sent_us = slots_now_us();
    /* Set before the claim can reach Redis: from then on its jobs may be
     * leased to this worker before it can list them. */
    w->slot->claim_in_flight = 1;
    int rc = rconn_send(w->cmd, &cmd, DQ_SCRIPT_CLAIM, on_claim, w);
    if (rc != 0)
        w->slot->claim_in_flight = 0;
    cmd_free(&cmd);
    return rc == 0 ? CLAIM_SENT : CLAIM_NOT_SENT;
}

/* A paused worker's look at the state: pause_state's reply. */
static void on_pause_state(struct rconn *rc, redisReply *reply, void *arg)
{
    (void)rc;
    struct worker *w = arg;
    int64_t now_ms, since_ms;
    w->state = W_IDLE;
    if (!reply) {
        /* connection lost: on_cmd_up looks again; partition 0's master
         * only (isolated masters): look again after a pause */
        if (rconn_is_up(w->cmd))
            worker_sleep_for(w, RETRY_AFTER_ERROR_MS);
        return;
    }
    if (proto_pause_reply(reply, &now_ms, &since_ms) != DQ_OK) {
        if (reply->type != REDIS_REPLY_ERROR)
            log_err("queue=%s: unexpected reply to pause_state", w->q->name);
        worker_sleep_for(w, RETRY_AFTER_ERROR_MS);
        return;
    }
    w->pause_recheck = 0;
    worker_observe_pause(w, since_ms >= 0, now_ms, w->poll_sent_us);
    if (w->pause.paused && !signals_stop_requested()) {
        slot_claims_ok(w->slot);    /* none are made: none fail */
        worker_sleep_until_due(w, -1);
    } else {
        worker_drive(w);
    }
}

/* Send pause_state; 0 when it is on its way. */
static int send_pause_poll(struct worker *w)
{
    struct cmd cmd;
    cmd_init(&cmd);
    proto_pause_cmd(&cmd, qparts_keys(&w->parts, 0), DQ_SCRIPT_PAUSE_STATE);
    w->poll_sent_us = slots_now_us();
    int rc = rconn_send(w->cmd, &cmd, DQ_SCRIPT_PAUSE_STATE, on_pause_state, w);
    cmd_free(&cmd);
    return rc;
}

/* Claim when idle (paused: look at the state instead); stop when asked
 * and nothing is in hand. */
void worker_drive(struct worker *w)
{
    if (w->state != W_IDLE)
        return;
    if (signals_stop_requested()) {
        event_base_loopbreak(w->base);
        return;
    }
    if (w->pause.paused) {
        if (send_pause_poll(w) == 0)
            w->state = W_POLLING;   /* else not up: on_cmd_up polls */
        return;
    }
    switch (send_claim(w)) {
    case CLAIM_SENT:
        w->state = W_CLAIMING;
        break;
    case CLAIM_NONE_REACHABLE:
        worker_sleep_until_due(w, qparts_next_due(&w->parts));
        break;
    case CLAIM_NOT_SENT:
        slot_claims_failed(w->slot, "not connected to Redis");
        break;
    }
}

void worker_claim_ahead(struct worker *w)
{
    if (w->ahead == AHEAD_NONE && send_claim(w) == CLAIM_SENT)
        w->ahead = AHEAD_SENT;
}
