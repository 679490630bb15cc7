/*
 * The cancel board: which running job each worker is asked to stop, in
 * memory shared across fork (made by the supervisor before its first
 * fork, one row per child row, beside the worker slots).
 *
 * `delayq cancel` of a running job ends it in Redis at once (cancel.lua)
 * and publishes "cancel <fence> <id> <tag>" on the wake channel of the
 * job's partition (<tag> is the partition's hash tag, the text between
 * the braces of its keys).  A worker cannot hear it while its handler
 * runs, so the reaper, which listens on every partition's channel, finds
 * the worker whose slot shows that job under that fence and posts the
 * request in the worker's row.  Then:
 *   - the worker's handler reads it through dq_host.cancelled (the exec
 *     handler kills its program's process group), and the worker, once
 *     the handler returns, reports nothing for the job (it ended in
 *     Redis already); a job the worker has claimed and not started yet
 *     may be posted too, and the worker, which reads its row before it
 *     starts each job, then skips it;
 *   - the supervisor, on its tick, kills a worker whose job is still
 *     running the job's cancel_grace after the request, as it does at a
 *     timeout: only that job is touched (its batch-mates are settled).
 *
 * One writer per row (the reaper), readers anywhere: a request is written
 * under a sequence counter (odd while being written), as slots.h does.  A
 * request names its run by fence and id, so a stale one never matches
 * the next job the worker runs.
 */
#ifndef DQ_CANCEL_BOARD_H
#define DQ_CANCEL_BOARD_H

#include <delayq/client.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cancel_request {
    uint32_t seq;               /* even: stable; odd: being written */
    int64_t fence;              /* the run to stop; 0: none */
    int64_t requested_ms;       /* monotonic: when the reaper posted it */
    char id[DQ_ID_MAX + 1];
} __attribute__((aligned(64)));

/* Map `n` zeroed rows; NULL on failure (errno set). */
struct cancel_request *cancel_board_create(size_t n);
void cancel_board_destroy(struct cancel_request *b, size_t n);

/* Writer (the reaper): ask the worker of row `r` to stop the run of job
 * `id` under `fence`, as of monotonic `now_ms`. */
void cancel_request_post(struct cancel_request *r, int64_t fence, const char *id,
                         int64_t now_ms);

/* Reader: whether row `r` asks to stop the run of `id` under `fence`; if
 * so, *requested_ms (when not NULL) says since when. */
bool cancel_request_matches(const struct cancel_request *r, int64_t fence, const char *id,
                            int64_t *requested_ms);

/* The message cancel.lua publishes: "cancel <fence> <id> <tag>" (`len`
 * bytes, not NUL-terminated).  Returns whether it is one, with its parts
 * copied out (id and tag NUL-terminated; a part too long for its buffer
 * makes it not one). */
bool cancel_message_parse(const char *msg, size_t len, int64_t *fence, char *id,
                          size_t idlen, char *tag, size_t taglen);

#endif
