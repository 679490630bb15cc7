/*
 * The cluster reply policy (see cluster_policy.h): one pure function that
 * both connection stacks call.
 */
#include "redis/cluster_policy.h"

#include <stdio.h>
#include <string.h>

enum cluster_error_kind cluster_error_kind(const char *err)
{
    unsigned slot;
    char host[CLUSTER_HOST_MAX];
    int port;
    if (!err)
        return CLUSTER_ERR_NONE;
    switch (cluster_parse_redirect(err, &slot, host, sizeof host, &port)) {
    case CLUSTER_MOVED:
        return CLUSTER_ERR_MOVED;
    case CLUSTER_ASK:
        return CLUSTER_ERR_ASK;
    default:
        break;
    }
    if (strncmp(err, "TRYAGAIN", 8) == 0)
        return CLUSTER_ERR_TRYAGAIN;
    if (strncmp(err, "CLUSTERDOWN", 11) == 0)
        return CLUSTER_ERR_CLUSTERDOWN;
    if (strncmp(err, "READONLY", 8) == 0 || strncmp(err, "MASTERDOWN", 10) == 0
        || strncmp(err, "LOADING", 7) == 0)
        return CLUSTER_ERR_DEMOTED;
    return CLUSTER_ERR_NONE;
}

/* Give up: `outage` says whether the cluster is not serving (a connect
 * class failure) or answered with an error. */
static void give_up(struct cluster_decision *d, int outage, const char *why)
{
    d->verdict = CLUSTER_GIVE_UP;
    d->outage = outage;
    snprintf(d->why, sizeof d->why, "%s", why);
}

/* Wait and send again (`verdict` BACK_OFF or REFRESH) when the budget
 * has time left: the step with its jitter (+-25%), cut to what is left;
 * else give up saying `what` and how long it was tried. */
static void pause_or_give_up(const struct cluster_facts *f, struct cluster_decision *d,
                             enum cluster_verdict verdict, int outage, const char *what)
{
    int64_t left = f->budget_ms - f->elapsed_ms;
    if (left <= 0) {
        char why[sizeof d->why];
        snprintf(why, sizeof why, "%.150s (still after %lld ms)", what,
                 (long long)f->elapsed_ms);
        give_up(d, outage, why);
        return;
    }
    int step = f->pause_ms > 0 ? f->pause_ms : CLUSTER_PAUSE_MIN_MS;
    if (step > CLUSTER_PAUSE_MAX_MS)
        step = CLUSTER_PAUSE_MAX_MS;
    int ms = step + (int)(f->rnd % (unsigned long)(step / 2 + 1)) - step / 4;
    d->verdict = verdict;
    d->outage = outage;
    d->delay_ms = ms < left ? ms : (int)left;
    d->pause_ms = step * 2 > CLUSTER_PAUSE_MAX_MS ? CLUSTER_PAUSE_MAX_MS : step * 2;
    d->redirects = 0;   /* an ASK, then TRYAGAIN there, and again: not a loop */
}

/* MOVED or ASK: follow it, unless the command has been sent round too
 * often or an ASK answers an ASKING. */
static void redirect(const struct cluster_facts *f, struct cluster_decision *d,
                     enum cluster_error_kind kind)
{
    if (f->redirects >= CLUSTER_REDIRECTS_MAX) {
        char why[sizeof d->why];
        snprintf(why, sizeof why, "still redirected after %d redirections: %.120s",
                 CLUSTER_REDIRECTS_MAX, f->error);
        give_up(d, 0, why);
        return;
    }
    if (kind == CLUSTER_ERR_ASK && f->asked) {
        d->verdict = CLUSTER_ANSWER;
        return;
    }
    cluster_parse_redirect(f->error, &d->slot, d->host, sizeof d->host, &d->port);
    d->redirects = f->redirects + 1;
    d->verdict = kind == CLUSTER_ERR_MOVED ? CLUSTER_RESEND_MOVED : CLUSTER_RESEND_ASK;
    d->refresh_map = kind == CLUSTER_ERR_MOVED;
}

void cluster_policy_decide(const struct cluster_facts *f, struct cluster_decision *d)
{
    memset(d, 0, sizeof *d);
    d->verdict = CLUSTER_ANSWER;
    d->pause_ms = f->pause_ms;
    d->redirects = f->redirects;
    if (f->no_reply) {
        d->refresh_map = 1;
        if (f->sent)
            give_up(d, 1, "master lost with the command unanswered");
        else
            pause_or_give_up(f, d, CLUSTER_REFRESH, 1, "no master is up for the slot");
        return;
    }
    enum cluster_error_kind kind = cluster_error_kind(f->error);
    switch (kind) {
    case CLUSTER_ERR_NONE:
        return;
    case CLUSTER_ERR_MOVED:
    case CLUSTER_ERR_ASK:
        redirect(f, d, kind);
        return;
    case CLUSTER_ERR_TRYAGAIN:
    case CLUSTER_ERR_CLUSTERDOWN:
        pause_or_give_up(f, d, CLUSTER_BACK_OFF, kind == CLUSTER_ERR_CLUSTERDOWN, f->error);
        return;
    case CLUSTER_ERR_DEMOTED:
        d->refresh_map = 1;
        pause_or_give_up(f, d, CLUSTER_REFRESH, 1, f->error);
        return;
    }
}
