/*
 * ui_throttle: failed logins per client address (a wrong token or
 * password by the login form, Bearer or Basic).  The first
 * UI_THROTTLE_FREE failures cost nothing; after that each failure makes
 * the address wait 1 s, then 2, 4 ... up to UI_THROTTLE_MAX_WAIT_MS before
 * its next attempt is even checked (ui.c answers 429 with Retry-After
 * meanwhile).  The right secret after the wait gets in at once and clears
 * the address; a session already open is never throttled; so nobody is
 * locked out for longer than the current wait.  A record is forgotten
 * UI_THROTTLE_FORGET_MS after its last failure, and the table holds
 * UI_THROTTLE_ADDRS addresses (the oldest goes).
 *
 * It also says when to log: at most one line a second per address, with
 * the failures since the last line.
 */
#ifndef DQ_UI_THROTTLE_H
#define DQ_UI_THROTTLE_H

#include <stdint.h>

#define UI_THROTTLE_FREE 5
#define UI_THROTTLE_MAX_WAIT_MS 60000
#define UI_THROTTLE_FORGET_MS (15 * 60 * 1000)
#define UI_THROTTLE_ADDRS 512

struct ui_throttle;

struct ui_throttle *ui_throttle_new(void);
void ui_throttle_free(struct ui_throttle *t);

/* How long `addr` must still wait before an attempt is checked (ms, 0:
 * check it now); `now_ms` monotonic. */
int64_t ui_throttle_wait(struct ui_throttle *t, const char *addr, int64_t now_ms);

/* What to log of an address now (ui_throttle_failed's answer). */
struct ui_throttle_report {
    int log;            /* 1: log a line now */
    int64_t failures;   /* failed attempts since the last line */
    int64_t refused;    /* of which refused unchecked while waiting */
    int64_t total;      /* failures on record for the address */
    int64_t wait_ms;    /* the address waits this long now */
};

/* An attempt of `addr` failed (`refused`: it came during the wait and was
 * not checked); fills *rep. */
void ui_throttle_failed(struct ui_throttle *t, const char *addr, int refused,
                        int64_t now_ms, struct ui_throttle_report *rep);

/* `addr` gave the right secret: forget its failures. */
void ui_throttle_passed(struct ui_throttle *t, const char *addr);

#endif
