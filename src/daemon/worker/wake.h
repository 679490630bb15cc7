/*
 * wake: what a worker hears on its queue's wake channel, and what it
 * makes of it and of its own requests about the queue's pause.
 *
 * The channel carries three messages (docs/protocol.md):
 *   "<due_ms>"          a job is due sooner than the head (enqueue, fail,
 *                       reap ... publish it)
 *   "pause <now_ms>"    the queue was paused (pause.lua)
 *   "resume <now_ms>"   the queue was resumed (resume.lua)
 *
 * A worker learns the pause state from three sources that race: these
 * messages (on its subscription), and the replies of its claims and its
 * pause_state polls (on its command connection).  A reply may have been
 * computed before a message it is read after, so a message is always the
 * newest word, and a reply counts only when it is provably newer than the
 * last message heard: its request was sent after that message arrived, or
 * the script ran at a later server millisecond than the message says.
 */
#ifndef DQ_WAKE_H
#define DQ_WAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum wake_kind {
    WAKE_DUE,           /* a job is due at *ms */
    WAKE_PAUSE,         /* the queue was paused at *ms */
    WAKE_RESUME,        /* the queue was resumed at *ms */
    WAKE_UNKNOWN        /* none of these (a newer publisher): ignore it */
};

/* Read one message of `len` bytes (not NUL-terminated). */
enum wake_kind wake_parse(const char *msg, size_t len, int64_t *ms);

/* What a worker believes of its queue's pause. */
struct pause_view {
    bool paused;
    bool heard;                 /* a pause or resume message came */
    int64_t heard_ms;           /* its server time */
    int64_t heard_at_us;        /* monotonic: when it came */
};

/* A pause (paused true) or resume message at server time `ms`, received at
 * monotonic `now_us`. */
void pause_view_hear(struct pause_view *v, bool paused, int64_t ms, int64_t now_us);

/* A reply saying whether the queue is paused: its script ran at server ms
 * `server_ms`, its request left at monotonic `sent_us`.  Returns whether
 * it was taken (false: a message heard since may be newer). */
bool pause_view_observe(struct pause_view *v, bool paused, int64_t server_ms,
                        int64_t sent_us);

#endif
